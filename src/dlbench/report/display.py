"""Output of the report notebook: Markdown lines and clean HTML tables (needs IPython)."""

import pandas as pd
from IPython.display import Markdown, display

# Columns left-aligned by default; every other column is right-aligned.
TEXT_COLUMNS = {"cell_id", "status", "reason", "model", "framework", "optimization",
                "model, batch", ""}
TOOLTIP_STYLE = ("visibility: hidden; position: absolute; z-index: 1; background: #333; "
                 "color: #fff; padding: 4px;")


def say(text: str) -> None:
    """Render a line of Markdown as output."""
    display(Markdown(text))


def show(frame: pd.DataFrame, caption: str | None = None,
         tooltips: pd.DataFrame | None = None, left=None) -> None:
    """A clean HTML table: no index, text columns left-aligned, N/A cells greyed out.

    tooltips: a frame shaped like `frame` whose strings appear on hover (e.g. full reasons).
    left: the columns to left-align (default: the known text columns).
    """
    styler = (
        frame.style.hide(axis="index")
        .map(lambda v: "color: #888; font-style: italic" if str(v).startswith("N/A") else "")
        .set_table_styles([
            {"selector": "th", "props": "text-align: center; padding: 4px 10px;"},
            {"selector": "td", "props": "padding: 4px 10px;"},
            {"selector": "caption", "props": "caption-side: top; text-align: left; color: #555;"},
        ])
    )
    left = [c for c in frame.columns if c in TEXT_COLUMNS] if left is None else [
        c for c in left if c in frame.columns]
    right = [c for c in frame.columns if c not in left]
    for subset, align in ((left, "left"), (right, "right")):
        if subset:
            styler = styler.set_properties(subset=subset, **{"text-align": align})
    if tooltips is not None:
        styler = styler.set_tooltips(tooltips, props=TOOLTIP_STYLE)
    if caption:
        styler = styler.set_caption(caption)
    display(styler)
