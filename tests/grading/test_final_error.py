"""Finding the error that ended a run: tracebacks, fatal lines, chains, wrappers, warnings."""

from __future__ import annotations

from reb_ray.grading.final_error import error_events, final_errors, strip_prefixes

CHAINED = """\
Traceback (most recent call last):
  File "/venv/lib/python3.10/site-packages/transformers/utils/import_utils.py", line 1510, in _get_module
    return importlib.import_module("." + module_name, self.__name__)
ModuleNotFoundError: No module named 'flash_attn'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/repo/train.py", line 3, in <module>
    from transformers import LlamaForCausalLM
RuntimeError: Failed to import transformers.models.llama.modeling_llama because of the following error (look up to see its traceback):
No module named 'flash_attn'
"""


def test_a_chain_is_the_final_exception_then_its_cause():
    picked = final_errors(CHAINED)
    assert [e.text.splitlines()[0] for e in picked] == [
        "RuntimeError: Failed to import transformers.models.llama.modeling_llama because of the following error "
        "(look up to see its traceback):",
        "ModuleNotFoundError: No module named 'flash_attn'"]
    assert picked[0].text.endswith("No module named 'flash_attn'") and picked[0].chained
    assert all(e.kind == "traceback" for e in picked)


def test_an_earlier_unchained_traceback_is_only_context():
    log = CHAINED + "retrying without flash attention\n" + "Segmentation fault (core dumped)\n"
    picked = final_errors(log)
    assert [(e.kind, e.text) for e in picked] == [("fatal", "Segmentation fault (core dumped)")]


def test_warnings_are_never_events():
    log = ("/venv/lib/python3.10/site-packages/torch/cuda/__init__.py:118: UserWarning: CUDA initialization: "
           "CUDA driver initialization failed, you might not have a CUDA gpu.\n"
           "WARNING:root:ImportError: apex is not installed\n"
           "node1:77:90 [0] NCCL WARN NCCL error: failed to open /dev/shm\n")
    assert error_events(log) == []


def test_a_fatal_line_keeps_its_indented_details():
    log = "terminate called after throwing an instance of 'c10::Error'\n  what():  CUDA error: out of memory\nnext\n"
    (event,) = error_events(log)
    assert event.kind == "fatal" and event.text.endswith("what():  CUDA error: out of memory")


def test_a_traceback_cut_before_its_exception_is_not_an_event():
    assert error_events('Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n') == []


def test_a_wrapper_walks_back_to_the_childs_error_through_rank_prefixes():
    log = ("[rank1]: Traceback (most recent call last):\n[rank1]:   File \"t.py\", line 2, in <module>\n"
           "[rank1]: ImportError: libnccl.so.2: cannot open shared object file: No such file or directory\n"
           "Traceback (most recent call last):\n  File \"/venv/bin/torchrun\", line 8, in <module>\n"
           "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n")
    assert strip_prefixes(log).startswith("Traceback (most recent call last):\n  File \"t.py\"")
    picked = final_errors(log)
    assert [e.text.split(":", 1)[0] for e in picked] == [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError", "ImportError"]
