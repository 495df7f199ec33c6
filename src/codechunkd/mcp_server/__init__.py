"""``codechunkd mcp``: the index, served to coding agents over the Model Context Protocol.

Built on the official MCP SDK (``mcp``): stdio (what agents spawn) or, with
``--http``, streamable HTTP bound to 127.0.0.1.  Seven tools: ``search``,
``outline``, ``read_chunks`` and ``status`` (tools.py), ``definition``,
``references`` and ``repo_map`` (refs.py).

Searches go to the running daemon when there is one (its warm model, over the
control socket) and otherwise to the index on disk, opened read-only here; the
choice is made per call, so a daemon stopped or started under this server is
followed at once (backend.py).  Nothing here takes the writer's lock.  Every failure a user
can cause (no index, a bad filter, a stopped daemon) comes back as an MCP tool
error with a one-line message; the server keeps serving.

The package, module by module (imports point down the list):

- ``server``: the SDK's server with the tools registered, and ``serve`` (picks a transport);
- ``stdio``, ``http``: the two transports (HTTP: the bearer token, loopback, bounded waits);
- ``tools``, ``refs``: each tool's schema and body;
- ``render``: the text the model reads;
- ``worker``: the reader process the tools ask, forked before the SDK is imported;
- ``backend``: where answers come from (in the reader: the daemon or the index).

This file holds no code and imports nothing: ``worker`` is imported (and the reader forked)
before the SDK is, which ``server`` and the tools import at their top.
"""
