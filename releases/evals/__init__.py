"""Saved conversation tests, played: the YAML file and the saved rows (``files``). The contract — what a test is and
what it may expect — is :mod:`routing.conversation_tests.cases`."""

from releases.evals.files import (
    ConversationTestsFileError,
    conversation_test_case,
    conversation_tests_dump,
    conversation_tests_load,
    conversation_tests_parse,
    conversation_tests_saved,
    conversation_tests_text,
)

__all__ = [
    "ConversationTestsFileError",
    "conversation_test_case",
    "conversation_tests_dump",
    "conversation_tests_load",
    "conversation_tests_parse",
    "conversation_tests_saved",
    "conversation_tests_text",
]
