"""The example app, driven the way a user would drive it, and tested the way docs/testing.md
tells users to test theirs: with the `starlette_jobs.testing` plugin's database and helpers."""

from __future__ import annotations

import io

import pytest
from opentelemetry import metrics
from opentelemetry.metrics import _internal as metrics_api
from starlette.testclient import TestClient

from example_app.__main__ import configure_metrics
from example_app.app import app, jobs
from example_app.jobs import send_welcome_email
from starlette_jobs.testing import assert_enqueued_now


@pytest.fixture
def client(jobs_database: str, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    # The app's Jobs() takes its database from DATABASE_URL when it starts.
    monkeypatch.setenv("DATABASE_URL", jobs_database)
    return TestClient(app)


def test_signup_enqueues_jobs_that_succeed_including_one_after_two_retries(
    client: TestClient,
) -> None:
    with client:
        response = client.post("/signup", json={"email": "ada@example.com", "name": "Ada"})
        assert response.status_code == 202
        body = response.json()
        welcome_job = assert_enqueued_now(
            client, send_welcome_email, email="ada@example.com", name="Ada"
        )
        assert str(welcome_job.id) == body["job_id"]
        client.portal.call(jobs.drain, 20)  # type: ignore[union-attr]
        welcome = client.get(f"/jobs/{body['job_id']}").json()
        crm = client.get(f"/jobs/{body['crm_job_id']}").json()
        listed = client.get("/jobs").json()["jobs"]
    assert welcome["status"] == "succeeded"
    assert welcome["result"] == {"to": "ada@example.com", "subject": "Welcome, Ada!"}
    assert (crm["status"], crm["attempts"], len(crm["errors"])) == ("succeeded", 3, 2)
    assert {job["id"] for job in listed} == {int(body["job_id"]), int(body["crm_job_id"])}


def test_signup_with_bad_input_answers_422_and_enqueues_nothing(client: TestClient) -> None:
    with client:
        assert client.post("/signup", json={"email": 5}).status_code == 422
        assert client.post("/signup", content=b"not json").status_code == 400
        assert client.get("/jobs").json() == {"jobs": []}
        assert client.get("/jobs/999").status_code == 404
        assert client.get("/jobs/abc").status_code == 404


def test_with_the_console_exporter_the_jobs_metrics_are_printed(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert configure_metrics() is None  # not asked for
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "console")
    # The global provider is set once per process: this one is undone after the test.
    monkeypatch.setattr(metrics_api, "_METER_PROVIDER", None)
    monkeypatch.setattr(
        metrics, "set_meter_provider", lambda p: setattr(metrics_api, "_METER_PROVIDER", p)
    )
    out = io.StringIO()
    provider = configure_metrics(out)
    try:
        with client:
            client.post("/signup", json={"email": "ada@example.com", "name": "Ada"})
            client.portal.call(jobs.drain, 20)  # type: ignore[union-attr]
        provider.force_flush()
    finally:
        provider.shutdown()
    printed = out.getvalue()
    for name in ("messaging.client.sent.messages", "messaging.process.duration"):
        assert f'"name": "{name}"' in printed


def test_with_the_prometheus_exporter_the_jobs_metrics_are_served_for_scraping(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "prometheus")
    monkeypatch.setattr(metrics_api, "_METER_PROVIDER", None)
    monkeypatch.setattr(
        metrics, "set_meter_provider", lambda p: setattr(metrics_api, "_METER_PROVIDER", p)
    )
    # The route it adds is taken off again: the other tests' app has no /metrics.
    monkeypatch.setattr(app.router, "routes", list(app.router.routes))
    provider = configure_metrics()
    try:
        with client:
            client.post("/signup", json={"email": "ada@example.com", "name": "Ada"})
            client.portal.call(jobs.drain, 20)  # type: ignore[union-attr]
            scraped = client.get("/metrics/")
    finally:
        provider.shutdown()
    assert scraped.status_code == 200
    sent = [
        line
        for line in scraped.text.splitlines()
        if line.startswith("messaging_client_sent_messages_total{")
        and 'messaging_destination_name="emails"' in line
    ]
    assert [line.rsplit(" ", 1)[1] for line in sent] == ["1.0"], scraped.text
    assert "messaging_process_duration_seconds_count{" in scraped.text
