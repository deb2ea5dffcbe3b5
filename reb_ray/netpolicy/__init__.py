"""The network policy of sandboxes (why each choice: docs/DECISIONS.md, "Network").

`open` (the default) leaves a sandbox on the sweep's Docker network. `registries` puts it on
the node's internal network (network.py), where the only way out is its trial's allow-listing
egress proxy (proxy.py) to the hosts of the sweep's `network_allow` (allowlist.py) and the
node's LLM proxy; hostguard.py closes every other service of the node to it (iptables), the
proxies listening in the node's port range (ports.py); trial_egress.py is the trial's side:
set up, attach, log and count.
"""
