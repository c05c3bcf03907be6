//! `report.html`: one self-contained page of charts and tables.
//!
//! Charts are inline SVG drawn with plotters' SVG backend from [`Charts`] alone. The page loads
//! nothing (no scripts, no web fonts: text is `sans-serif`, so plotters needs no system font
//! either) and depends only on its input, so the same runs give byte-identical HTML.

use std::error::Error;
use std::fmt::Write;
use std::io;

use compactbench_eval::scenario::Scenario;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::charts::{Charts, Mark, Panel, Split, Timeline};
use crate::triggers::Spread;
use crate::markdown::{main_cells, MAIN_HEADER};
use crate::{glance, Row, StrategyMeta};

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Drawn = Result<(), Box<dyn Error>>;

const FONT: &str = "sans-serif";
const WIDTH: u32 = 1300;
/// Small multiples per row: panels stay wide enough (about 260 px) for a saw-tooth to read,
/// while thirty-odd strategies take seven rows rather than ten.
const COLS: usize = 5;

/// Strategy colours: Tableau 10 with its three lightest (yellow, pink, light teal) darkened, so
/// a one-pixel line stays visible on white. By the strategy's position in the report; ten
/// colours for more strategies means repeats, so every chart also names each strategy in text.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x49, 0x98, 0x94),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xb6, 0x99, 0x2d),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0xd3, 0x72, 0x95),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0x79, 0x70, 0x6e),
];
const VERBATIM: RGBColor = RGBColor(0x3b, 0x8e, 0x4a);
const RECOVERABLE: RGBColor = RGBColor(0xe6, 0xa8, 0x2e);
const LOST: RGBColor = RGBColor(0xcc, 0x44, 0x3c);
const STALE: RGBColor = RGBColor(0x6a, 0x3d, 0x9a);
const GREY: RGBColor = RGBColor(0x88, 0x88, 0x88);
const FAINT: RGBColor = RGBColor(0xee, 0xee, 0xee);
const SHAPES: [&str; 4] = ["OpenAI Chat", "OpenAI Responses", "Anthropic", "Gemini"];
const SHAPE_COLORS: [RGBColor; 4] = [RGBColor(0x10, 0xa3, 0x7f), RGBColor(0x0b, 0x6e, 0x5a), RGBColor(0xc1, 0x5f, 0x3c), RGBColor(0x42, 0x85, 0xf4)];

fn color(charts: &Charts, strategy: &str) -> RGBColor {
    PALETTE[charts.strategies.iter().position(|s| s == strategy).unwrap_or(0) % PALETTE.len()]
}

/// Draws into a fresh SVG of `size` pixels and returns the `<svg>` element.
fn svg(size: (u32, u32), draw: impl FnOnce(&Area<'_>) -> Drawn) -> io::Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        let drawn = root.fill(&WHITE).map_err(Into::into).and_then(|()| draw(&root)).and_then(|()| Ok(root.present()?));
        drawn.map_err(|e| io::Error::other(format!("drawing report.html: {e}")))?;
    }
    Ok(out)
}

fn style(size: u32, color: &'static RGBColor, h: HPos) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font()).color(color).pos(Pos::new(h, VPos::Center))
}

fn text(area: &Area<'_>, s: &str, at: (i32, i32), size: u32, h: HPos) -> Drawn {
    area.draw(&Text::new(s.to_owned(), at, style(size, &BLACK, h)))?;
    Ok(())
}

/// What a legend entry shows before its text.
enum Key {
    Line(RGBColor),
    Dashed(RGBColor),
    Dot(RGBColor),
    Cross(RGBColor),
    Block(RGBColor),
}

/// A one-line legend from `x` at height `y`. Widths are estimated from the character count:
/// the SVG viewer picks the real font, so nothing can measure it here.
fn legend(area: &Area<'_>, entries: &[(Key, String)], (mut x, y): (i32, i32)) -> Drawn {
    for (key, label) in entries {
        match key {
            Key::Line(c) => area.draw(&PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(2)))?,
            Key::Dashed(c) => {
                for k in 0..3 {
                    area.draw(&PathElement::new(vec![(x + 8 * k, y), (x + 8 * k + 5, y)], c.stroke_width(2)))?;
                }
            }
            Key::Dot(c) => area.draw(&Circle::new((x + 11, y), 4, c.filled()))?,
            Key::Cross(c) => area.draw(&Cross::new((x + 11, y), 4, c.stroke_width(2)))?,
            Key::Block(c) => area.draw(&Rectangle::new([(x + 4, y - 6), (x + 18, y + 6)], c.filled()))?,
        }
        text(area, label, (x + 28, y), 13, HPos::Left)?;
        x += 28 + (label.chars().count() as f64 * 7.2) as i32 + 22;
    }
    Ok(())
}

/// Title and legend strip above a figure; returns the area below it.
fn header<'a>(area: &Area<'a>, title: &str, entries: &[(Key, String)]) -> Result<Area<'a>, Box<dyn Error>> {
    let (head, body) = area.split_vertically(64);
    text(&head, title, (10, 18), 17, HPos::Left)?;
    legend(&head, entries, (10, 46))?;
    Ok(body)
}

fn thousands(v: f64) -> String {
    if v >= 1000.0 { format!("{}k", (v / 1000.0).round()) } else { format!("{v:.0}") }
}

/// Panels in rows of [`COLS`].
fn grid<'a>(area: &Area<'a>, n: usize) -> Vec<Area<'a>> {
    area.split_evenly((n.div_ceil(COLS).max(1), COLS))
}

fn timeline_svg(charts: &Charts, t: &Timeline) -> io::Result<String> {
    const PANEL: u32 = 180;
    let rows = t.panels.len().div_ceil(COLS) as u32;
    let xmax = t.panels.iter().map(|p| p.tokens.len()).max().unwrap_or(1).max(2) as f64 - 1.0;
    svg((WIDTH, 64 + rows * PANEL), |root| {
        let title = format!("Request tokens over the session — {} (seed {}, window {} tokens)", t.scenario, t.seed, t.window);
        let body = header(
            root,
            &title,
            &[
                (Key::Line(PALETTE[0]), "request tokens (one panel per strategy)".into()),
                (Key::Dashed(BLACK), "window".into()),
                (Key::Line(GREY), "lowest size it compacted at on its own".into()),
                (Key::Dot(BLACK), "compaction".into()),
                (Key::Cross(LOST), "failed compaction".into()),
            ],
        )?;
        for (area, p) in grid(&body, t.panels.len()).iter().zip(&t.panels) {
            timeline_panel(area, p, color(charts, &p.strategy), xmax, t.window)?;
        }
        Ok(())
    })
}

/// One strategy's saw-tooth. Each panel scales to its own peak (at least the window): one
/// strategy that never compacts would otherwise flatten every other panel; the window line is
/// the common reference.
fn timeline_panel(area: &Area<'_>, p: &Panel, c: RGBColor, xmax: f64, window: u64) -> Drawn {
    let ymax = p.tokens.iter().copied().max().unwrap_or(0).max(window) as f64 * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(&p.strategy, (FONT, 13))
        .margin(6)
        .x_label_area_size(32)
        .y_label_area_size(44)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
    chart
        .configure_mesh()
        .x_desc("request")
        .y_desc("tokens")
        .x_labels(4)
        .y_labels(4)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| thousands(*v))
        .label_style((FONT, 10))
        .axis_desc_style((FONT, 11))
        .bold_line_style(FAINT)
        .light_line_style(TRANSPARENT)
        .draw()?;
    let w = window as f64;
    // Long dashes: plotters draws every dash as its own SVG element.
    chart.draw_series(DashedLineSeries::new(vec![(0.0, w), (xmax, w)], 7, 4, BLACK.stroke_width(1)))?;
    if let Some(t) = p.lowest_trigger {
        chart.draw_series(LineSeries::new(vec![(0.0, t as f64), (xmax, t as f64)], GREY.stroke_width(1)))?;
    }
    chart.draw_series(LineSeries::new(p.tokens.iter().enumerate().map(|(i, t)| (i as f64, *t as f64)), c.stroke_width(1)))?;
    let at = |m: &Mark| (f64::from(m.request), m.tokens as f64);
    chart.draw_series(p.marks.iter().filter(|m| !m.failed).map(|m| Circle::new(at(m), 2, BLACK.filled())))?;
    chart.draw_series(p.marks.iter().filter(|m| m.failed).map(|m| Cross::new(at(m), 3, LOST.stroke_width(2))))?;
    Ok(())
}

/// One bar cell of a [`BarGrid`]: stacked segments as fractions of the cell's width, and an
/// optional number printed after the bar.
struct Cell {
    segments: Vec<(f64, RGBColor)>,
    note: Option<String>,
}

/// Horizontal bars, one row per strategy and one column per category: strategy names are read
/// once at the left instead of under every bar.
struct BarGrid {
    title: String,
    legend: Vec<(Key, String)>,
    columns: Vec<String>,
    rows: Vec<String>,
    /// `cells[row][column]`; `None` draws "no data".
    cells: Vec<Vec<Option<Cell>>>,
    /// Tick labels under each column at 0 and the full width.
    ticks: (String, String),
    x_desc: String,
}

fn bar_grid_svg(g: &BarGrid) -> io::Result<String> {
    const ROW: i32 = 20;
    const LEFT: i32 = 270;
    let height = 64 + 26 + ROW * g.rows.len() as i32 + 52;
    svg((WIDTH, height as u32), |root| {
        let body = header(root, &g.title, &g.legend)?;
        let cw = (WIDTH as i32 - LEFT - 10) / g.columns.len().max(1) as i32;
        let bar = cw - 44;
        let bottom = 26 + ROW * g.rows.len() as i32;
        text(&body, "strategy", (LEFT - 200, 12), 12, HPos::Left)?;
        for (j, col) in g.columns.iter().enumerate() {
            let x0 = LEFT + j as i32 * cw;
            text(&body, col, (x0 + bar / 2, 12), 12, HPos::Center)?;
            body.draw(&PathElement::new(vec![(x0, 24), (x0, bottom)], BLACK.stroke_width(1)))?;
            body.draw(&PathElement::new(vec![(x0, bottom), (x0 + bar, bottom)], BLACK.stroke_width(1)))?;
            for (x, label) in [(x0, &g.ticks.0), (x0 + bar, &g.ticks.1)] {
                body.draw(&PathElement::new(vec![(x, bottom), (x, bottom + 4)], BLACK.stroke_width(1)))?;
                text(&body, label, (x, bottom + 12), 10, HPos::Center)?;
            }
        }
        text(&body, &g.x_desc, (LEFT + (WIDTH as i32 - LEFT) / 2, bottom + 34), 12, HPos::Center)?;
        for (i, (name, cells)) in g.rows.iter().zip(&g.cells).enumerate() {
            let y = 26 + ROW * i as i32;
            text(&body, name, (LEFT - 8, y + ROW / 2), 12, HPos::Right)?;
            for (j, cell) in cells.iter().enumerate() {
                let x0 = LEFT + j as i32 * cw + 1;
                let (top, bot) = (y + 3, y + ROW - 3);
                body.draw(&Rectangle::new([(x0, top), (x0 + bar, bot)], FAINT.filled()))?;
                let Some(cell) = cell else {
                    text(&body, "no data", (x0 + bar / 2, y + ROW / 2), 10, HPos::Center)?;
                    continue;
                };
                let mut x = x0;
                for (share, c) in &cell.segments {
                    let w = (share * f64::from(bar)).round() as i32;
                    if w > 0 {
                        body.draw(&Rectangle::new([(x, top), (x + w, bot)], c.filled()))?;
                    }
                    x += w;
                }
                if let Some(note) = &cell.note {
                    text(&body, note, (x + 4, y + ROW / 2), 10, HPos::Left)?;
                }
            }
        }
        Ok(())
    })
}

fn retention_grid(charts: &Charts) -> BarGrid {
    let mut columns: Vec<String> = charts.kinds.iter().map(|k| k.as_str().to_owned()).collect();
    columns.push("all kinds".into());
    let cell = |s: &Split| {
        let n = f64::from(s.total());
        (s.total() > 0).then(|| Cell {
            segments: vec![
                (f64::from(s.verbatim) / n, VERBATIM),
                (f64::from(s.recoverable) / n, RECOVERABLE),
                (f64::from(s.lost) / n, LOST),
                (f64::from(s.stale) / n, STALE),
            ],
            note: None,
        })
    };
    let mut legend = vec![(Key::Block(VERBATIM), "verbatim".into()), (Key::Block(RECOVERABLE), "recoverable (from an offloaded file)".into()), (Key::Block(LOST), "lost".into())];
    if charts.by_kind.iter().flatten().any(|s| s.stale > 0) {
        legend.push((Key::Block(STALE), "stale (an old value shown as current)".into()));
    }
    BarGrid {
        title: "Retention by fact kind — state at the last request that needed each fact, all scenarios and seeds".into(),
        legend,
        columns,
        rows: charts.strategies.clone(),
        cells: charts.by_kind.iter().map(|splits| splits.iter().map(cell).collect()).collect(),
        ticks: ("0%".into(), "100%".into()),
        x_desc: "share of the kind's facts (%)".into(),
    }
}

fn violations_grid(charts: &Charts) -> BarGrid {
    let max = charts.violations.iter().flatten().max().copied().unwrap_or(0);
    let cells = charts
        .violations
        .iter()
        .map(|v| {
            v.iter()
                .zip(SHAPE_COLORS)
                .map(|(n, c)| Some(Cell { segments: vec![(if max == 0 { 0.0 } else { *n as f64 / max as f64 }, c)], note: Some(n.to_string()) }))
                .collect()
        })
        .collect();
    BarGrid {
        title: "Request validity violations per provider shape — summed over all requests of all scenarios and seeds".into(),
        legend: SHAPES.iter().zip(SHAPE_COLORS).map(|(s, c)| (Key::Block(c), (*s).to_owned())).collect(),
        columns: SHAPES.iter().map(|s| (*s).to_owned()).collect(),
        rows: charts.strategies.clone(),
        cells,
        ticks: ("0".into(), max.max(1).to_string()),
        x_desc: "violations (bars scaled to the largest count)".into(),
    }
}

fn drift_svg(charts: &Charts) -> io::Result<String> {
    const PANEL: u32 = 180;
    let shown: Vec<(&String, &Vec<Split>)> = charts.strategies.iter().zip(&charts.drift).filter(|(_, d)| d.iter().any(|s| s.total() > 0)).collect();
    let rows = shown.len().div_ceil(COLS).max(1) as u32;
    let rounds = charts.drift.first().map_or(1, Vec::len);
    let any_stale = shown.iter().any(|(_, d)| d.iter().any(|s| s.stale > 0));
    svg((WIDTH, 64 + rows * PANEL), |root| {
        let mut keys = vec![
            (Key::Line(PALETTE[0]), "retained (verbatim or recoverable) %".into()),
            (Key::Dashed(PALETTE[0]), "verbatim only %".into()),
            (Key::Block(GREY), "grey numbers: facts that went through that many compactions".into()),
        ];
        if any_stale {
            keys.push((Key::Line(STALE), "stale % (an old value shown as current)".into()));
        }
        let body = header(root, "Retention after a fact's 1st, 2nd, … compaction (the drift curve) — all scenarios and seeds", &keys)?;
        for (area, (st, splits)) in grid(&body, shown.len()).iter().zip(&shown) {
            let c = color(charts, st);
            let mut chart = ChartBuilder::on(area)
                .caption(*st, (FONT, 13))
                .margin(6)
                .x_label_area_size(32)
                .y_label_area_size(44)
                .build_cartesian_2d(0.5f64..rounds as f64 + 0.5, 0f64..122.0)?;
            chart
                .configure_mesh()
                .x_desc("compaction round")
                .y_desc("retained %")
                .x_labels(rounds)
                .y_labels(3)
                .x_label_formatter(&|v| format!("{v:.0}"))
                // The headroom above 100 holds the counts, not values.
                .y_label_formatter(&|v| if *v > 100.0 { String::new() } else { format!("{v:.0}") })
                .label_style((FONT, 10))
                .axis_desc_style((FONT, 11))
                .bold_line_style(FAINT)
                .light_line_style(TRANSPARENT)
                .draw()?;
            let pts = |verbatim_only: bool| -> Vec<(f64, f64)> {
                splits
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.total() > 0)
                    .map(|(k, s)| {
                        let kept = if verbatim_only { s.verbatim } else { s.verbatim + s.recoverable };
                        (k as f64 + 1.0, 100.0 * f64::from(kept) / f64::from(s.total()))
                    })
                    .collect()
            };
            chart.draw_series(DashedLineSeries::new(pts(true), 4, 3, c.stroke_width(1)))?;
            chart.draw_series(LineSeries::new(pts(false), c.stroke_width(2)).point_size(3))?;
            if splits.iter().any(|s| s.stale > 0) {
                let stale = splits.iter().enumerate().filter(|(_, s)| s.total() > 0);
                let stale: Vec<(f64, f64)> = stale.map(|(k, s)| (k as f64 + 1.0, 100.0 * f64::from(s.stale) / f64::from(s.total()))).collect();
                chart.draw_series(LineSeries::new(stale, STALE.stroke_width(1)).point_size(2))?;
            }
            let counts = splits.iter().enumerate().filter(|(_, s)| s.total() > 0);
            chart.draw_series(counts.map(|(k, s)| Text::new(s.total().to_string(), (k as f64 + 1.0, 114.0), style(9, &GREY, HPos::Center))))?;
        }
        Ok(())
    })
}

fn triggers_svg(charts: &Charts) -> io::Result<String> {
    const ROW: u32 = 22;
    const LABELS: u32 = 200;
    const NOTES: u32 = 190;
    let shown: Vec<(&String, &Spread)> = charts.strategies.iter().zip(&charts.triggers).filter_map(|(st, t)| Some((st, t.as_ref()?))).collect();
    // At least the whole window; beyond it when some strategy let the context overflow first.
    let xmax = shown.iter().map(|(_, t)| t.max).fold(100.0, f64::max).div_euclid(10.0) * 10.0 + 10.0;
    svg((WIDTH, 64 + 48 + ROW * shown.len().max(1) as u32), |root| {
        let body = header(
            root,
            "Context usage at compaction (exact tokens, % of window) — all scenarios and seeds",
            &[
                (Key::Line(GREY), "min to max".into()),
                (Key::Block(PALETTE[0]), "p10 to p90".into()),
                (Key::Cross(BLACK), "median".into()),
                (Key::Dashed(LOST), "the window".into()),
            ],
        )?;
        let (labels, rest) = body.split_horizontally(LABELS);
        let (plot, notes) = rest.split_horizontally(WIDTH - LABELS - NOTES);
        let mut chart = ChartBuilder::on(&plot).margin(6).x_label_area_size(36).build_cartesian_2d(0f64..xmax, 0f64..shown.len().max(1) as f64)?;
        chart
            .configure_mesh()
            .x_desc("usage at compaction, % of window")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .disable_y_mesh()
            .disable_y_axis()
            .label_style((FONT, 11))
            .axis_desc_style((FONT, 12))
            .bold_line_style(FAINT)
            .light_line_style(TRANSPARENT)
            .draw()?;
        chart.draw_series(DashedLineSeries::new(vec![(100.0, 0.0), (100.0, shown.len() as f64)], 5, 4, LOST.stroke_width(1)))?;
        for (i, (st, t)) in shown.iter().enumerate() {
            let y = shown.len() as f64 - i as f64 - 0.5;
            let c = color(charts, st);
            chart.draw_series(std::iter::once(PathElement::new(vec![(t.min, y), (t.max, y)], GREY.stroke_width(1))))?;
            chart.draw_series(std::iter::once(Rectangle::new([(t.p10, y - 0.3), (t.p90.max(t.p10 + 0.4), y + 0.3)], c.filled())))?;
            chart.draw_series(std::iter::once(Cross::new((t.median, y), 4, BLACK.stroke_width(2))))?;
            let row = 6 + (ROW as f64 * (i as f64 + 0.5)) as i32;
            text(&labels, st, (LABELS as i32 - 8, row), 12, HPos::Right)?;
            let mid = 100.0 * t.mid_loop as f64 / t.compactions as f64;
            text(&notes, &format!("{} compactions, {mid:.0}% mid-loop", t.compactions), (8, row), 11, HPos::Left)?;
        }
        Ok(())
    })
}

/// Tick values for a log axis over `lo..hi`: 1-2-5 steps, or finer ones when the range is too
/// narrow for those to give at least four (plotters' own log ticks are powers of ten only).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let within = |mantissas: &[f64]| -> Vec<f64> {
        let (k0, k1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        (k0..=k1).flat_map(|k| mantissas.iter().map(move |m| m * 10f64.powi(k))).filter(|v| (lo..=hi).contains(v)).collect()
    };
    let coarse = within(&[1.0, 2.0, 5.0]);
    if coarse.len() >= 4 { coarse } else { within(&[1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]) }
}

fn scatter_svg(charts: &Charts) -> io::Result<String> {
    const HEIGHT: u32 = 700;
    const LEGEND: u32 = 400;
    // Log scale: most strategies cost about the same and a few cost several times more; on a
    // linear axis the many would sit on top of each other. Free points (zero pricing) are drawn
    // at the left edge, their exact cost is in the list.
    let positive = || charts.scatter.iter().map(|p| p.cost).filter(|c| *c > 0.0);
    let lo = positive().fold(f64::INFINITY, f64::min);
    let hi = positive().fold(0.0, f64::max);
    let (lo, hi) = if lo.is_finite() { (lo / 1.25, hi * 1.25) } else { (0.001, 1.0) };
    let x = |cost: f64| cost.max(lo);
    svg((WIDTH, HEIGHT), |root| {
        let body = header(
            root,
            "Cost vs retention — one session of every scenario; upper left is better",
            &[(Key::Dot(PALETTE[0]), "strategy (numbered as in the list)".into()), (Key::Dashed(BLACK), "Pareto front (nothing cheaper retains as much)".into())],
        )?;
        let (plot, list) = body.split_horizontally(WIDTH - LEGEND);
        let mut chart = ChartBuilder::on(&plot)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d((lo..hi).log_scale().with_key_points(log_ticks(lo, hi)), 0f64..105.0)?;
        chart
            .configure_mesh()
            .x_desc("cost per session, summed over scenarios ($, log scale)")
            .y_desc("retained: verbatim + recoverable (% of facts)")
            .x_label_formatter(&|v| if *v >= 10.0 { format!("{v:.0}") } else { format!("{v:.2}") })
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FONT, 11))
            .axis_desc_style((FONT, 13))
            .bold_line_style(FAINT)
            .light_line_style(TRANSPARENT)
            .draw()?;
        let mut front: Vec<(f64, f64)> = charts.scatter.iter().filter(|p| p.front).map(|p| (x(p.cost), p.retained)).collect();
        front.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        // A step line: from each front point, retention holds until the next one buys more.
        let mut steps: Vec<(f64, f64)> = Vec::new();
        for (i, p) in front.iter().enumerate() {
            if i > 0 {
                steps.push((p.0, front[i - 1].1));
            }
            steps.push(*p);
        }
        chart.draw_series(DashedLineSeries::new(steps, 6, 4, BLACK.stroke_width(1)))?;
        for (i, p) in charts.scatter.iter().enumerate() {
            let c = color(charts, &p.strategy);
            let at = (x(p.cost), p.retained);
            chart.draw_series(std::iter::once(Circle::new(at, 6, c.filled())))?;
            if p.front {
                chart.draw_series(std::iter::once(Circle::new(at, 9, BLACK.stroke_width(1))))?;
            }
            chart.draw_series(std::iter::once(Text::new((i + 1).to_string(), at, style(11, &BLACK, HPos::Left).pos(Pos::new(HPos::Left, VPos::Bottom)))))?;
        }
        let row = (HEIGHT as i32 - 64 - 30) / charts.scatter.len().max(1) as i32;
        let row = row.clamp(12, 20);
        text(&list, "#  strategy: cost $, retained % (★ on the front)", (8, 14), 12, HPos::Left)?;
        for (i, p) in charts.scatter.iter().enumerate() {
            let y = 34 + row * i as i32;
            list.draw(&Circle::new((14, y), 5, color(charts, &p.strategy).filled()))?;
            let star = if p.front { " ★" } else { "" };
            text(&list, &format!("{}  {}: {:.2}, {:.0}%{star}", i + 1, p.strategy, p.cost, p.retained), (26, y), 12, HPos::Left)?;
        }
        Ok(())
    })
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn anchor(scenario: &str) -> String {
    format!("scenario-{scenario}")
}

const STYLE: &str = "body{font-family:sans-serif;max-width:1320px;margin:0 auto;padding:0 12px 40px;color:#222}\
h1{margin-top:24px}h2{margin-top:36px;border-bottom:1px solid #ddd}svg{max-width:100%;height:auto;display:block}\
figure{margin:12px 0}figcaption{font-size:13px;color:#555;max-width:1100px}\
table{border-collapse:collapse;font-size:12px;margin:12px 0}th,td{border:1px solid #ddd;padding:3px 6px}\
td.n{text-align:right}th{background:#f4f4f4}tr:nth-child(even) td{background:#fafafa}";

/// The page: overview charts over all scenarios, then per scenario the token timeline and the
/// main table of report.md.
pub(crate) fn html(scenarios: &[Scenario], meta: &[StrategyMeta], rows: &[Row], charts: &Charts, summarizer: &str) -> io::Result<String> {
    let mut out = String::new();
    let _ = write!(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>compactbench report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n");
    let _ = writeln!(out, "<h1>compactbench report</h1>");
    let _ = writeln!(
        out,
        "<p>Summarizer: <code>{}</code> (the null and oracle bounds are in report.md). Tokens are exact (tiktoken) per request. The same numbers as report.md; column meanings in reports/README.md.</p>",
        esc(summarizer)
    );
    let _ = writeln!(out, "<p>Overview (all scenarios): <a href=\"#cost\">cost vs retention</a> · <a href=\"#kinds\">retention by fact kind</a> · <a href=\"#drift\">drift</a> · <a href=\"#triggers\">when compactions fire</a> · <a href=\"#violations\">violations</a><br>Scenarios: {}</p>",
        charts.timelines.iter().map(|t| format!("<a href=\"#{}\">{}</a>", anchor(&t.scenario), esc(&t.scenario))).collect::<Vec<_>>().join(" · "));
    let _ = writeln!(out, "<h2 id=\"glance\">At a glance</h2>\n<table>\n<tr>{}</tr>", glance::header(summarizer).iter().map(|h| format!("<th>{}</th>", esc(h))).collect::<String>());
    for g in glance::glance(meta, rows, summarizer) {
        let tds: String = glance::cells(&g).iter().enumerate().map(|(i, c)| format!("<td{}>{}</td>", if (2..8).contains(&i) { " class=\"n\"" } else { "" }, esc(c))).collect();
        let _ = writeln!(out, "<tr>{tds}</tr>");
    }
    let _ = writeln!(out, "</table>\n<p>Pooled over every scenario and seed. Retained: facts verbatim in, or recoverable from, the last request that needed them; prompted and oracle are the summary bounds. Cost: a session of each scenario; of which compaction: its summary calls, each priced as the request its harness sends. Violations: provider rules broken, all four shapes. <code>modelled</code>: closed source, our reading of its documentation.</p>");
    let figure = |out: &mut String, id: &str, title: &str, svg: String, caption: &str| {
        let _ = writeln!(out, "<h2 id=\"{id}\">{title}</h2>\n<figure>\n{svg}\n<figcaption>{caption}</figcaption>\n</figure>");
    };
    figure(&mut out, "cost", "Cost vs retention", scatter_svg(charts)?,
        "Cost (log scale): each scenario's mean cost per session under its pricing (input, cached input, output, summarizer), summed over scenarios. Retained: facts verbatim in, or recoverable from, the last request that needed them, pooled over scenarios and seeds.");
    figure(&mut out, "kinds", "Retention by fact kind", bar_grid_svg(&retention_grid(charts))?, "Each bar is 100% of the facts of that kind the strategy's sessions needed.");
    figure(&mut out, "drift", "Retention vs compaction round", drift_svg(charts)?,
        "State of each fact at the first request after its k-th compaction (facts that went through k). Strategies that never compacted have no panel.");
    figure(&mut out, "triggers", "When compactions fire", triggers_svg(charts)?,
        "Each successful compaction's context just before it, by the runner's exact count, as % of the scenario's window. Strategies trigger on their own estimates, so the spread shows how early, late and unpredictably each fires. Mid-loop: the newest message was a tool result (TraceLab's real Claude Code and Codex sessions: 86.5%). Strategies that never compacted are not drawn.");
    let total: u64 = charts.violations.iter().flatten().sum();
    let verdict = if total == 0 { "No request of any strategy violated a rule in this run. " } else { "" };
    figure(
        &mut out,
        "violations",
        "Validity violations",
        bar_grid_svg(&violations_grid(charts))?,
        &format!("{verdict}Rules checked per shape: tool results after their calls, no orphan or missing results, first role, role alternation, no empty content."),
    );
    for t in &charts.timelines {
        let Some(sc) = scenarios.iter().find(|s| s.name == t.scenario) else { continue };
        let _ = writeln!(out, "<h2 id=\"{}\">{}</h2>", anchor(&sc.name), esc(&sc.name));
        let _ = writeln!(
            out,
            "<p>{} Model <code>{}</code>: window {}, max output {}, provider {}.</p>",
            esc(&sc.description),
            esc(&sc.model.name),
            sc.model.window,
            sc.model.max_output,
            sc.model.provider.as_str()
        );
        let caption = "Each compaction is marked at the request it preceded. The grey line is the smallest exact context at which the strategy compacted on its own (not at an overflow): strategies trigger on their own estimators, on message counts or only at turn ends, so their configured threshold cannot be drawn in exact tokens; this is the lowest point at which it was seen to fire.";
        let _ = writeln!(out, "<figure>\n{}\n<figcaption>{caption}</figcaption>\n</figure>", timeline_svg(charts, t)?);
        let _ = writeln!(out, "<table>\n<tr>{}</tr>", MAIN_HEADER.iter().map(|h| format!("<th>{}</th>", esc(h))).collect::<String>());
        for r in rows.iter().filter(|r| r.scenario == sc.name && r.summarizer == summarizer) {
            let cells = main_cells(r);
            let tds: String = cells.iter().enumerate().map(|(i, c)| format!("<td{}>{}</td>", if i == 0 { "" } else { " class=\"n\"" }, esc(c))).collect();
            let _ = writeln!(out, "<tr>{tds}</tr>");
        }
        let _ = writeln!(out, "</table>");
    }
    let _ = writeln!(out, "</body>\n</html>");
    Ok(out)
}
