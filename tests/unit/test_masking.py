"""Masking a run's secrets: the exact value and every form a page, a URL or an HTML document
carries it in (the encoders browsers, forms and scripts use), for any secret."""

from __future__ import annotations

import html
from urllib.parse import quote, quote_plus, urlencode

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pagefleet.workflow.masking import MASK, Masker, encoded_forms

# Secrets as tenants have them: letters, digits, any unicode, and the characters that
# encoders treat differently (&, +, %, spaces, quotes, slashes).
SECRETS = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
        st.sampled_from(list("&+% ~/?#=@'<>\\" + '"')),
    ),
    min_size=3,
    max_size=24,
)


def encode_uri_component(text: str) -> str:
    """JavaScript's encodeURIComponent."""
    return quote(text, safe="-_.!~*'()")


def form_field(text: str, charset: str = "utf-8") -> str:
    """A field as an HTML form's GET writes it into the URL (WHATWG urlencoded), in the
    page's charset (a page that declares none submits windows-1252)."""
    out = []
    for char in text:
        if char == " ":
            out.append("+")
        elif char.isascii() and (char.isalnum() or char in "*-._"):
            out.append(char)
        else:
            out.extend(f"%{b:02X}" for b in char.encode(charset, errors="xmlcharrefreplace"))
    return "".join(out)


ENCODERS = {
    "as is": lambda s: s,
    "quote": quote,
    "quote, nothing safe": lambda s: quote(s, safe=""),
    "quote_plus": quote_plus,
    "urlencode": lambda s: urlencode({"q": s})[2:],
    "encodeURIComponent": encode_uri_component,
    "lower-case hex": lambda s: quote(s, safe="").lower() if s.isascii() else quote(s).lower(),
    "form GET": form_field,
    "form GET, windows-1252 page": lambda s: form_field(s, "cp1252"),
    "HTML": html.escape,
}


# Around the secret: characters no secret here has, so that no form straddles a boundary.
EDGE = "\x00"


@settings(derandomize=True, max_examples=400)  # the same examples on every run (CI)
@given(SECRETS, st.sampled_from(sorted(ENCODERS)))
def test_no_form_of_a_secret_survives_masking(secret: str, encoder: str) -> None:
    assume("*" not in secret)  # the mask itself is made of it
    carried = ENCODERS[encoder](secret)
    if encoder == "lower-case hex":
        assume(carried in encoded_forms(secret))  # lower-cased letters of the secret itself
    if encoder == "form GET, windows-1252 page":
        assume(secret.encode("cp1252", errors="ignore").decode("cp1252") == secret)
    # Only EDGE around it: words there ("url", "title") would hold short secrets ("tit")
    # themselves, and masking them too would be right.
    text = f"{EDGE}{carried}{EDGE}{EDGE}{carried}{EDGE}"
    masked = Masker.of([secret]).text(text)
    assert secret not in masked
    assert carried not in masked, (encoder, carried)
    assert masked == f"{EDGE}{MASK}{EDGE}{EDGE}{MASK}{EDGE}"


def test_the_forms_of_one_secret() -> None:
    forms = encoded_forms("p@ss w&rd+%é")
    assert {
        "p@ss w&rd+%é",
        "p%40ss%20w%26rd%2B%25%C3%A9",  # percent-encoded, nothing kept
        "p%40ss+w%26rd%2B%25%C3%A9",  # a form's + for spaces
        "p%40ss%20w%26rd%2b%25%c3%a9",  # lower-case hex
        "p@ss%20w&rd+%%C3%A9",  # a browser's URL parser, in a query
        "p@ss w&amp;rd+%é",  # HTML
        "p%40ss+w%26rd%2B%25%E9",  # a form on a page without a charset (windows-1252)
    } <= forms


def test_a_longer_secret_is_masked_whole_before_one_inside_it() -> None:
    masker = Masker.of(["abc", "xxabcxx"])
    assert masker.text("[xxabcxx] [abc]") == "[***] [***]"


def test_values_inside_results_are_masked_and_nothing_else_changes() -> None:
    masker = Masker.of(["s3cret value"])
    result = {"a": ["url?q=s3cret+value", 3, None], "b": {"c": "s3cret%20value"}, "d": "ok"}
    assert masker.value(result) == {"a": ["url?q=***", 3, None], "b": {"c": "***"}, "d": "ok"}
    assert Masker().value(result) is result  # no secrets: nothing to do
