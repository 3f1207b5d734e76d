"""`_status_tokens`: a job's status token opens that job only, under that secret only, and
nothing else that looks like one is taken; the routes that use them are in test_status_routes.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from starlette_jobs.web import JobStatusTokens

SECRET = "a secret of at least thirty-two bytes, from the environment"
tokens = JobStatusTokens(SECRET)


@given(st.integers(min_value=1, max_value=2**63 - 1))
def test_a_token_gives_back_its_job_id_and_no_other(job_id: int) -> None:
    token = tokens.token(job_id)
    assert len(token) == 32
    assert token.isascii()
    assert all(c.isalnum() or c in "-_" for c in token)  # URL-safe
    assert tokens.job_id(token) == job_id
    assert JobStatusTokens(SECRET + "!").job_id(token) is None


@given(st.text(max_size=40))
def test_what_no_secret_made_opens_nothing(text: str) -> None:
    assert tokens.job_id(text) is None or tokens.token(tokens.job_id(text) or 0) == text


def test_every_altered_character_is_refused() -> None:
    token = tokens.token(42)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for place in range(len(token)):
        for other in alphabet.replace(token[place], ""):
            assert tokens.job_id(token[:place] + other + token[place + 1 :]) is None


def test_the_id_does_not_show_in_the_token_nor_the_secret_anywhere() -> None:
    assert tokens.token(1) != tokens.token(2)
    assert "42" not in tokens.token(42)
    assert SECRET not in repr(tokens)


def test_a_short_secret_or_no_possible_id_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        JobStatusTokens("password")
    JobStatusTokens(b"\x00" * 32)  # bytes will do
    for not_an_id in (0, -1, 2**63):
        with pytest.raises(ValueError, match="no job can have"):
            tokens.token(not_an_id)
