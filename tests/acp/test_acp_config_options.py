"""The profile config option, built without a client: config text on its way to a client
(a model name, a note naming a profile written by hand) is one safe, bounded line."""

from __future__ import annotations

import re

from core.profiles import Profile
from tui.acp.config_options import missing_key_error, profile_options, unknown_profile_error

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
PROFILES = {
    "offline": Profile("offline", builtin=True),
    "work": Profile(
        "work",
        provider="openai",
        model="\x1b[31mgpt\u202e\n\ud800",
        api_key_env="DSH_TEST_UNIT_ABSENT_KEY",
    ),
}


def test_choices_and_their_descriptions_are_safe() -> None:
    (option,) = profile_options(PROFILES, PROFILES["work"])
    assert option.current_value == "work" and option.category == "model"
    assert [(c.value, c.name) for c in option.options] == [  # type: ignore[union-attr]
        ("offline", "offline"),
        ("work", "work"),
    ]
    work = option.options[1].description or ""  # type: ignore[union-attr]
    assert work.startswith("openai · \\x1b[31mgpt") and not UNSAFE.search(work)


def test_a_note_is_the_description_escaped_and_bounded() -> None:
    note = "profile '\x1b]0;x\x07" + "y" * 1000 + "' is not configured any more"
    (option,) = profile_options(PROFILES, PROFILES["offline"], note)
    assert option.current_value == "offline"
    assert option.description is not None and option.description.startswith("profile '\\x1b]0;x")
    assert len(option.description) <= 200 and not UNSAFE.search(option.description)


def test_errors() -> None:
    err = unknown_profile_error("\ud800" * 500, PROFILES)
    assert str(err).startswith("unknown profile '\ufffd") and len(str(err)) < 120
    assert str(err).endswith(": choose one of offline, work")
    assert missing_key_error(PROFILES["offline"], "s") is None
    missing = missing_key_error(PROFILES["work"], "s")
    assert missing is not None and "no API key: set DSH_TEST_UNIT_ABSENT_KEY" in str(missing)
