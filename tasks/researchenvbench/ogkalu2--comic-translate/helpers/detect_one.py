"""Run the repository's RT-DETR-v2 ONNX text/bubble detector on one image.

Stands for the inline Python of the paper harness's run_cpu_entrypoint.sh and
run_single_gpu_entrypoint.sh: build modules.detection.rtdetr_v2_onnx.RTDetrV2ONNXDetection,
initialize it on the given device (it fetches ogkalu/comic-text-and-bubble-detector's
config.json and detector.onnx with hf_hub_download, i.e. from the Hugging Face cache when
offline), detect on one RGB image and print the number of text blocks.

    python detect_one.py --image IMG [--device cpu|cuda]

Run from the repository root. Writes nothing itself (the repository creates models/detection).
As in the paper's harness, the optional font-attribute model (a separate download made per text
block) is replaced by a stub that reports no attributes. With --device cuda the run fails unless
the ONNX Runtime session really uses the CUDA (or TensorRT) execution provider, as the paper's
single-GPU stage required.
"""

import argparse
import os
import sys

sys.path.insert(0, os.getcwd())

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

import modules.detection.base as det_base  # noqa: E402
from modules.detection.rtdetr_v2_onnx import RTDetrV2ONNXDetection  # noqa: E402

GPU_PROVIDERS = ("CUDAExecutionProvider", "TensorrtExecutionProvider")


class _NoFontEngine:
    def process(self, image):
        return {"available": False}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image", required=True)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()

    det_base.FontEngineFactory.create_engine = classmethod(lambda cls, settings, backend="onnx": _NoFontEngine())

    det = RTDetrV2ONNXDetection()
    det.initialize(device=args.device, confidence_threshold=0.3)  # as the paper's harness
    used = det.session.get_providers()
    print("onnxruntime providers:", used)
    if args.device != "cpu" and not any(name in used for name in GPU_PROVIDERS):
        sys.exit(f"device {args.device!r} asked for, but the session runs on {used}")
    image = np.array(Image.open(args.image).convert("RGB"))
    blocks = det.detect(image)
    print(f"{len(blocks)} text blocks in {os.path.basename(args.image)} ({image.shape[1]}x{image.shape[0]})")


if __name__ == "__main__":
    main()
