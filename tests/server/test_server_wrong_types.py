"""The apiserver's order of errors over real HTTPS (issue #33, 5): an object with a field of the
wrong type is the CRD schema's to refuse, in its words (``spec in body must be of type
object``), never CEL internals or an internal error from the policies; the mutating webhook
lets it through untouched (the apiserver validates the schema after it), the validating webhook
answers the schema's words. An AdmissionReview without apiVersion or kind is a 400 naming what
is missing, without Python's ``None``."""

from __future__ import annotations

import orjson
import pytest
import yaml

from .conftest import review

# as a user writes them (what the apiserver hands the webhook unchanged: nothing to prune or default)
SPEC_AN_ARRAY = yaml.safe_load("""\
apiVersion: kubeai.org/v1
kind: Model
metadata:
  name: llama
  namespace: team-a
spec: [1, 2]
""")

WRONG_TYPES = yaml.safe_load("""\
apiVersion: kubeai.org/v1
kind: Model
metadata:
  name: llama
  namespace: team-a
spec:
  features: TextGeneration
  url: 5
  engine: VLLM
  minReplicas: zero
""")

PRIORITY_A_STRING = yaml.safe_load("""\
apiVersion: llm-d.ai/v1alpha2
kind: InferenceObjective
metadata:
  name: batch
  namespace: team-a
spec:
  priority: high
  poolRef:
    name: qwen3-pool
""")


def internals(text: str) -> list[str]:
    return [word for word in ("no such key", "InternalError", "resulted in error", "None", "Traceback",
                              "unsupported index", "no matching overload") if word in text]


@pytest.mark.parametrize("obj, field", [(SPEC_AN_ARRAY, "spec in body must be of type object"),
                                        (WRONG_TYPES, "spec.url in body must be of type string"),
                                        (PRIORITY_A_STRING, "spec.priority in body must be of type integer")])
async def test_mutate_lets_a_wrongly_typed_object_through_and_validate_answers_the_schema(live, obj, field):
    status, body = await live.post("/mutate", review(obj))
    assert status == 200
    response = body["response"]
    assert response["allowed"] is True and "patch" not in response, response
    assert not internals(orjson.dumps(response).decode()), response
    status, body = await live.post("/validate", review(obj))
    response = body["response"]
    assert status == 200 and response["allowed"] is False, response
    assert response["status"]["code"] == 422 and response["status"]["reason"] == "Invalid", response
    assert field in response["status"]["message"], response["status"]["message"]
    assert not internals(response["status"]["message"]), response["status"]["message"]


@pytest.mark.parametrize("drop, message", [
    ("apiVersion", "unsupported apiVersion (none given): expected one of admission.k8s.io/v1, admission.k8s.io/v1beta1"),
    ("kind", "expected kind AdmissionReview, got no kind"),
])
async def test_a_review_without_apiversion_or_kind_names_what_is_missing(live, drop, message):
    sent = review(SPEC_AN_ARRAY)
    del sent[drop]
    session = live.session()
    async with session.post(live.url + "/validate", data=orjson.dumps(sent),
                            headers={"Content-Type": "application/json"}) as r:
        answer = orjson.loads(await r.read())
    assert r.status == 400 and answer["kind"] == "Status" and answer["code"] == 400, answer
    assert answer["message"] == message
    assert "None" not in answer["message"]
