"""Shared fixtures for the task tests: one small tokenizer per session (offline, ~1 s)."""

from __future__ import annotations

import pydoc_data.topics as topics
import pytest

from repro.data.tokenizer import train_tokenizer

TASK_TEXT = [
    "Some special magic numbers are hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the numbers afterwards. One of the special magic numbers for bright-anchor is: 1234567.",
    "What is the special magic number for bright-anchor mentioned in the provided text? "
    "The special magic number for bright-anchor mentioned in the provided text is",
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.",
    "Memorize and track the chain(s) of variable assignment hidden in the following text. VAR ABCDE = 12345",
    "Below is a numbered list of words. Read the following coded text and track the frequency of each coded word.",
    "Answer the question based on the given documents. Only give me the answer and do not output any other words.",
    "Mary journeyed to the office. Mary got the apple. Mary dropped the apple. Where was the apple?",
    "JSON data: Extract the value corresponding to the specified key in the JSON object below. "
    "Key: Corresponding value:",
]


@pytest.fixture(scope="session")
def tokenizer():
    texts = [topics.topics[k] for k in sorted(topics.topics)][:60] + TASK_TEXT * 20
    return train_tokenizer(texts, 2048)
