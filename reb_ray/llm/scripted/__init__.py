"""The scripted LLM endpoint: a real small server that replays tool calls and usage numbers.

The stand-in for a model wherever none can run (tests, CI, benchmarks): the real agent CLIs
talk to it over HTTP exactly as to a vendor. `Script` / `load_script` read a script,
`ScriptedEndpoint` serves it; `reb-ray llm serve --script FILE` runs it in the foreground.
"""

from reb_ray.llm.scripted.script import Script, load_script, script_from
from reb_ray.llm.scripted.server import ScriptedEndpoint

__all__ = ["Script", "ScriptedEndpoint", "load_script", "script_from"]
