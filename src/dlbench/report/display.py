"""Output of the report notebook: Markdown lines, clean HTML tables, and figures with a text
alternative for readers who cannot see them (needs IPython)."""

import matplotlib.pyplot as plt
import pandas as pd
from IPython import get_ipython
from IPython.core.pylabtools import print_figure
from IPython.display import Markdown, display
from matplotlib.figure import Figure
from pandas.io.formats.style import Styler

from dlbench.format import css_text, html_text

# A '$' in a model's or a path's name is text, not mathtext (no plot uses mathtext).
plt.rcParams["text.parse_math"] = False

# Columns left-aligned by default; every other column is right-aligned.
TEXT_COLUMNS = {"cell_id", "status", "reason", "model", "framework", "optimization",
                "model, batch", ""}
TOOLTIP_STYLE = ("visibility: hidden; position: absolute; z-index: 1; background: #333; "
                 "color: #fff; padding: 4px;")


def say(text: str) -> None:
    """Render a line of Markdown as output. Put a record's string in it only through
    dlbench.format's md_text, md_code or md_code_block: Markdown passes HTML on."""
    display(Markdown(text))


def show(frame: pd.DataFrame, caption: str | None = None,
         tooltips: pd.DataFrame | None = None, left=None, html=()) -> None:
    """Display `styled`'s table."""
    display(styled(frame, caption, tooltips, left, html))


def styled(frame: pd.DataFrame, caption: str | None = None,
           tooltips: pd.DataFrame | None = None, left=None, html=()) -> Styler:
    """A clean HTML table: no index, text columns left-aligned, N/A cells greyed out.

    tooltips: a frame shaped like `frame` whose strings appear on hover (e.g. full reasons).
    left: the columns to left-align (default: the known text columns).
    html: the columns whose values are HTML made from escaped parts (format.file_link's);
    every other value, and every header, caption and tooltip, is shown as text (a
    record's reason or name may hold markup).
    """
    styler = (
        frame.style.hide(axis="index")
        .format(escape="html")
        .format_index(escape="html", axis="columns")
        .map(lambda v: "color: #888; font-style: italic" if str(v).startswith("N/A") else "")
        .set_table_styles([
            {"selector": "th", "props": "text-align: center; padding: 4px 8px;"},
            {"selector": "td", "props": "padding: 4px 8px;"},
            {"selector": "caption", "props": "caption-side: top; text-align: left; color: #555;"},
        ])
    )
    # Whole numbers stored as floats (a column with gaps) print as integers, not '16.000000'.
    whole = [c for c in frame.columns if pd.api.types.is_float_dtype(frame[c])
             and frame[c].dropna().eq(frame[c].dropna().round()).all()]
    if whole:
        styler = styler.format(lambda v: "" if pd.isna(v) else f"{v:.0f}", subset=whole)
    if html:
        styler = styler.format(None, subset=list(html))
    left = [c for c in frame.columns if c in TEXT_COLUMNS] if left is None else [
        c for c in left if c in frame.columns]
    right = [c for c in frame.columns if c not in left]
    for subset, align in ((left, "left"), (right, "right")):
        if subset:
            styler = styler.set_properties(subset=subset, **{"text-align": align})
    if tooltips is not None:
        # pandas writes a tooltip into a CSS string in a <style> element, unescaped.
        styler = styler.set_tooltips(tooltips.map(lambda v: css_text(v) if isinstance(v, str)
                                                  else v), props=TOOLTIP_STYLE)
    if caption:
        styler = styler.set_caption(html_text(caption))
    return styler


# An axis's tick labels go into its words up to this many (beyond, they are a scale, not
# values a reader looks up).
MOST_TICKS = 12


def _labelled(axis) -> str:
    """A labelled axis's label and its tick labels as drawn, major and minor, in order:
    'batch size [1, 2, 4]' (the ticks left out where there are none or too many); '' for
    an axis without a label."""
    label = axis.get_label_text()
    low, high = sorted(axis.get_view_interval())
    placed = [*zip(axis.get_majorticklocs(), axis.get_majorticklabels(), strict=False),
              *zip(axis.get_minorticklocs(), axis.get_minorticklabels(), strict=False)]
    ticks = [text.get_text() for place, text in sorted(placed, key=lambda p: p[0])
             if low <= place <= high and text.get_text()]  # the locator's are wider
    if not label or not 0 < len(ticks) <= MOST_TICKS:
        return label
    return f"{label} [{', '.join(ticks)}]"


def describe(fig: Figure) -> str:
    """A figure in words, from what it shows as text: its title, each panel's title, axes
    with their tick labels, and legend (the HTML's `alt`, which screen readers read and
    browsers show when the image is missing)."""
    panels = []
    for ax in fig.axes:
        said = [f"{name}: {text}" for name, text in (
            ("", ax.get_title()), ("x", _labelled(ax.xaxis)), ("y", _labelled(ax.yaxis)))
            if text]
        legend = ax.get_legend()
        if legend is not None:
            said.append("legend: " + ", ".join(t.get_text() for t in legend.get_texts()))
        if said:
            panels.append("; ".join(s.removeprefix(": ") for s in said))
    for legend in fig.legends:
        panels.append("legend: " + ", ".join(t.get_text() for t in legend.get_texts()))
    title = fig.get_suptitle()
    head = f"Figure {title!r}" if title else "Figure"
    return ". ".join([head, *dict.fromkeys(panels)]) + "."


def _png_with_text(fig: Figure) -> tuple[bytes, dict]:
    return print_figure(fig, "png", bbox_inches="tight"), {"alt": describe(fig)}


def describe_figures() -> None:
    """Every figure the notebook shows from now on carries `describe`'s text (nbconvert
    writes it as the image's alt), in place of the inline backend's PNG printer."""
    shell = get_ipython()
    if shell is None:
        return
    # The inline backend registers its own printer when pyplot first loads a backend (at the
    # first figure): load it now, so that ours is registered last and stays.
    plt.close(plt.figure())
    shell.display_formatter.formatters["image/png"].for_type(Figure, _png_with_text)


describe_figures()
