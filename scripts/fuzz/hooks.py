"""schemathesis hooks for `npm run fuzz` (loaded through SCHEMATHESIS_HOOKS).

schemathesis reuses ids it has seen in responses, and GET /api/v1/keys lists the fuzzer's own
key: left alone it rotates or revokes that key within the first thousand requests, and every
request after it only tests the 401. No request may name the fuzzer's own key; every other
operation on keys is fuzzed as usual.
"""

import os
import zlib

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
