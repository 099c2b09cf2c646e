"""schemathesis hooks for `npm run fuzz` (loaded through SCHEMATHESIS_HOOKS).

schemathesis reuses ids it has seen in responses, and GET /api/v1/keys lists the fuzzer's own
key: left alone it rotates or revokes that key within the first thousand requests, and every
request after it only tests the 401. No request may name the fuzzer's own key; every other
operation on keys is fuzzed as usual. Webhook URLs are pointed at loopback (see `loopback`).
"""

import os
import zlib
from urllib.parse import urlsplit, urlunsplit

import schemathesis

OWN_KEY_ID = os.environ["RAGPORT_FUZZ_KEY_ID"]


@schemathesis.hook
def filter_case(context, case):
    return OWN_KEY_ID not in (case.path_parameters or {}).values()


# The gateway's models come from its providers (here the mock upstream), so the OpenAPI document
# cannot list them and generated names all end as 404 model_not_found. Every other generated chat
# body asks for the mock's model instead, so the gateway, the upstream call and the documented
# responses behind the model lookup are fuzzed too.
CHAT_MODEL = os.environ.get("RAGPORT_FUZZ_CHAT_MODEL")


@schemathesis.hook
def map_body(context, body):
    operation = context.operation
    if (
        CHAT_MODEL
        and operation is not None
        and operation.path.endswith("/chat/completions")
        and isinstance(body, dict)
        # crc32, not hash(): Python salts string hashes per process, and FUZZ_SEED must repeat a run.
        and zlib.crc32(repr(sorted(body)).encode()) % 2 == 0
    ):
        return {**body, "model": CHAT_MODEL}
    return body


# Right before each request, in every phase (map_body is not applied to all of them).
@schemathesis.hook
def before_call(context, case, **kwargs):
    if (
        case.operation.path == "/api/v1/webhooks"
        and isinstance(case.body, dict)
        and isinstance(case.body.get("url"), str)
    ):
        case.body = {**case.body, "url": loopback(case.body["url"])}


# Webhook endpoints the fuzzer registers would receive deliveries (the server has a signing key):
# a URL that names a host is pointed at a closed port on loopback, keeping its scheme, path and
# query, so that deliveries are made and fail without any traffic leaving the machine. Strings that
# are not such URLs go through as generated, for the validation.
def loopback(url):
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return url
    return urlunsplit((parts.scheme, "127.0.0.1:9", parts.path, parts.query, parts.fragment))
