# A naive webhook deduplicator, the baseline that `make bench` measures beside hookdedup
# on the same machine: Python and FastAPI (Debian's python3-fastapi and uvicorn, one
# worker), claims held in an in-process dict, nothing durable, and every claim scanning
# every key held (here: to drop the expired ones). It verifies standard-webhooks
# signatures as hookdedup does, keys a delivery by its webhook-id and answers as
# hookdedup answers.
#
#   REF_SECRET   the source's whsec_ secret
#   REF_PRELOAD  keys held before the first request (default 0)
#
# /usr/bin/python3 -m uvicorn reference:app --app-dir testdata --port 8090 --no-access-log
import base64
import hashlib
import hmac
import json
import os
import time

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

SECRET = base64.b64decode(os.environ["REF_SECRET"].removeprefix("whsec_"))
TTL = 24 * 3600
TOLERANCE = 5 * 60

app = FastAPI()
claims: dict[str, float] = {}  # key -> expiry (unix seconds)
now = time.time()
for i in range(int(os.environ.get("REF_PRELOAD", "0"))):
    claims[f"preloaded_{i}"] = now + TTL
deliveries = 0


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


@app.post("/webhooks/{source}")
async def receive(source: str, request: Request):
    global deliveries
    body = await request.body()
    msg_id = request.headers.get("webhook-id", "")
    stamp = request.headers.get("webhook-timestamp", "")
    signatures = request.headers.get("webhook-signature", "")
    if not msg_id or not stamp.isdigit() or abs(time.time() - int(stamp)) > TOLERANCE:
        return error(401, "signature: missing headers or timestamp out of tolerance")
    mac = hmac.new(SECRET, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    expected = base64.b64encode(mac).decode()
    if not any(s.startswith("v1,") and hmac.compare_digest(s[3:], expected) for s in signatures.split()):
        return error(401, "signature: no match")
    try:
        json.loads(body)
    except ValueError:
        return error(400, "body is not JSON")
    t = time.time()
    for key in [k for k, expires in claims.items() if expires <= t]:
        del claims[key]
    deliveries += 1
    if msg_id in claims:
        return {"status": "duplicate", "key": msg_id, "delivery": str(deliveries)}
    claims[msg_id] = t + TTL
    return {"status": "accepted", "key": msg_id, "delivery": str(deliveries)}
