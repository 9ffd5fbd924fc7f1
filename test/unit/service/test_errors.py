"""sagemaker_tfs.service.errors: every error the service answers is JSON, with falcon's
headers."""

from __future__ import annotations

import falcon
import falcon.testing
from sagemaker_tfs.service import errors


class _PostOnly:
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {}


def test_wrong_method_is_405_json_with_allow() -> None:
    app = falcon.App()
    errors.install(app)
    app.add_route("/invocations", _PostOnly())
    result = falcon.testing.TestClient(app).simulate_get("/invocations")
    assert result.status_code == 405
    assert result.headers["content-type"] == "application/json"
    assert "POST" in result.headers["allow"]
    assert isinstance(result.json["error"], str)
