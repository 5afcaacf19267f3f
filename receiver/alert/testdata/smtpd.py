"""A real SMTP server for the email channel's tests: aiosmtpd (Debian's
python3-aiosmtpd) on 127.0.0.1:PORT, requiring STARTTLS with the given certificate
and AUTH (PLAIN or LOGIN) with the given user and password. Each message it takes is
written as JSON to OUTDIR. It prints "ready" once it listens and stops when its
standard input closes.

usage: smtpd.py PORT CERT KEY USER PASSWORD OUTDIR
"""
import json
import os
import ssl
import sys

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

port, cert, key, user, password, outdir = sys.argv[1:7]


class Handler:
    def __init__(self):
        self.n = 0

    async def handle_DATA(self, server, session, envelope):
        self.n += 1
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "data": envelope.content.decode("utf-8", "replace"),
            "tls": session.ssl is not None,
            "authenticated": bool(session.authenticated),
        }
        tmp = os.path.join(outdir, ".msg-%d.tmp" % self.n)
        with open(tmp, "w") as f:
            json.dump(record, f)
        os.rename(tmp, os.path.join(outdir, "msg-%d.json" % self.n))
        return "250 Message accepted"


def authenticator(server, session, envelope, mechanism, auth_data):
    ok = (isinstance(auth_data, LoginPassword)
          and auth_data.login == user.encode()
          and auth_data.password == password.encode())
    return AuthResult(success=ok, handled=False)


context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
context.load_cert_chain(cert, key)
controller = Controller(
    Handler(), hostname="127.0.0.1", port=int(port),
    tls_context=context, require_starttls=True,
    authenticator=authenticator, auth_required=True, auth_require_tls=True,
)
controller.start()
print("ready", flush=True)
sys.stdin.read()
controller.stop()
