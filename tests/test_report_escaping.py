"""Text from the records — a reason, an exception's message, a model's or a path's name —
is shown as text wherever the report puts it: Markdown lines (through nbconvert's own
Markdown renderer, as in the report), tables (pandas' Styler, tooltips too) and links."""

import pandas as pd
import pytest
from bs4 import BeautifulSoup
from nbconvert.filters.markdown_mistune import markdown2html_mistune

from dlbench.format import css_text, file_link, md_code, md_code_block, md_text
from dlbench.report.display import styled

SCRIPT = "<script>window.__pwned = 1</script>"
IMAGE = '"><img src=x onerror="window.__pwned = 2">'
# Markdown's own syntax too: a link, emphasis, a code span's and a code block's fences.
HOSTILE = [SCRIPT, IMAGE, "[click](javascript:alert(1)) *bold* _it_ `x` ``y`` ```z",
           "a\\<b>c\\</b> & &lt;d&gt;"]


def planted(html: str) -> list[str]:
    """The elements markup could have planted: scripts, images, links, emphasis."""
    soup = BeautifulSoup(html, "html.parser")
    return [tag.name for tag in soup.find_all(["script", "img", "a", "em", "strong", "b"])]


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_text_is_text(text):
    html = markdown2html_mistune(f"Reason: {md_text(text)}.")
    assert planted(html) == []
    assert BeautifulSoup(html, "html.parser").get_text().strip() == f"Reason: {text}."


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_code_is_text(text):
    inline = BeautifulSoup(markdown2html_mistune(f"Path {md_code(text)} here"), "html.parser")
    assert planted(str(inline)) == []
    assert [code.get_text() for code in inline.find_all("code")] == [text]
    block = BeautifulSoup(markdown2html_mistune(md_code_block(f"{text}\n```\n{text}", "yaml")),
                          "html.parser")
    assert planted(str(block)) == []
    # nbconvert highlights a block with Pygments: a <pre> of spans.
    assert [pre.get_text() for pre in block.find_all("pre")] == [f"{text}\n```\n{text}\n"]


def test_a_table_shows_its_values_headers_caption_and_tooltips_as_text():
    frame = pd.DataFrame({"model": [SCRIPT, "bert"], IMAGE: ["1.0", "N/A (" + IMAGE + ")"],
                          "flame graph": [file_link(f"results/{IMAGE}.svg"), file_link(IMAGE)]})
    tips = pd.DataFrame("", index=frame.index, columns=frame.columns)
    tips.iloc[0, 0] = f'{SCRIPT}</style>{IMAGE}"; color: red'
    html = styled(frame, caption=SCRIPT, tooltips=tips, html=["flame graph"]).to_html()
    soup = BeautifulSoup(html, "html.parser")
    # The one link is file_link's, to the planted path, with its label; nothing else planted.
    assert [(a["href"], a.get_text()) for a in soup.find_all("a")] == [
        (f"../results/{IMAGE}.svg", "flame graph")]
    assert planted(html) == ["a"]
    assert soup.caption.get_text() == SCRIPT
    assert [th.get_text() for th in soup.find_all("th")] == ["model", IMAGE, "flame graph"]
    cells = [td.get_text() for td in soup.find_all("td")]
    assert cells == [SCRIPT, "1.0", "flame graph", "bert", f"N/A ({IMAGE})", IMAGE]
    # The tooltip stays inside its CSS string: one <style>, and the string never closes early.
    assert len(soup.find_all("style")) == 1
    assert css_text(tips.iloc[0, 0]) in soup.style.get_text()


def test_css_text_escapes_what_ends_a_string_or_a_style():
    assert css_text('a"b\\c</style>\nd') == "a\\22 b\\5C c\\3C /style\\3E \\A d"
