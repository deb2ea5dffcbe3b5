"""The host side of the hidden probes: it puts the in-sandbox programs (the top-level `probes/`
package, standard library only) into a sandbox after the agent phase, runs each one, and returns
its raw record for the graders. Named apart from `probes/` so a reader knows which side of the
sandbox wall a module runs on."""
