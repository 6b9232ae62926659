"""Milvus Lite runs its gRPC server inside the test process, and pymilvus keeps its client channels (with keepalive
pings) open until the interpreter exits; the server's shutdown then makes gRPC's C core log "GOAWAY ... too_many_pings"
lines after pytest's summary. They are harmless, but they bury the summary line, so gRPC's own logging is turned off
for this test process (before any channel is made: conftest files are imported at collection). A user's setting wins.
"""

from __future__ import annotations

import os

os.environ.setdefault("GRPC_VERBOSITY", "NONE")
