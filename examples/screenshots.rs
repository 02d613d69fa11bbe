//! Renders inspector screens into PNGs under `screenshots/`, reproducibly:
//!
//! ```text
//! cargo run --example screenshots
//! ```
//!
//! Each screen is the inspector's `TestBackend` buffer after a few `App::step` actions on the
//! bundled demo, painted cell by cell with DejaVu Sans Mono (from the `dejavu` crate; DejaVu
//! fonts are under a free licence, see the crate) — no terminal or screenshot tool involved.

// A measurement harness may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use gyre_engine::admit::Settings;
use gyre_engine::demo::Demo;
use gyre_engine::load::{LoadOptions, load_bytes};
use gyre_tui::app::{Action, App};
use gyre_tui::keys::Command as C;
use gyre_tui::pane::{Effect, Pane};
use gyre_tui::theme::Theme;
use gyre_tui::ui;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

const CELL_W: u32 = 10;
const CELL_H: u32 = 20;
const SCALE: f32 = 16.5;
const BG: [u8; 3] = [0x1c, 0x1c, 0x1c];
const FG: [u8; 3] = [0xd0, 0xd0, 0xd0];

struct Fonts<'a> {
    regular: FontRef<'a>,
    bold: FontRef<'a>,
    italic: FontRef<'a>,
    fallback: FontRef<'a>,
}

fn xterm(i: u8) -> [u8; 3] {
    const BASE: [[u8; 3]; 16] = [
        [0, 0, 0],
        [205, 49, 49],
        [13, 188, 121],
        [229, 229, 16],
        [36, 114, 200],
        [188, 63, 188],
        [17, 168, 205],
        [229, 229, 229],
        [102, 102, 102],
        [241, 76, 76],
        [35, 209, 139],
        [245, 245, 67],
        [59, 142, 234],
        [214, 112, 214],
        [41, 184, 219],
        [255, 255, 255],
    ];
    match i {
        0..=15 => BASE[i as usize],
        16..=231 => {
            let i = i - 16;
            let v = |c: u8| if c == 0 { 0 } else { 55 + c * 40 };
            [v(i / 36), v((i / 6) % 6), v(i % 6)]
        }
        _ => {
            let g = 8 + (i - 232) * 10;
            [g, g, g]
        }
    }
}

fn rgb(c: Color, default: [u8; 3]) -> [u8; 3] {
    match c {
        Color::Reset => default,
        Color::Black => xterm(0),
        Color::Red => xterm(1),
        Color::Green => xterm(2),
        Color::Yellow => xterm(3),
        Color::Blue => xterm(4),
        Color::Magenta => xterm(5),
        Color::Cyan => xterm(6),
        Color::Gray => xterm(7),
        Color::DarkGray => xterm(8),
        Color::LightRed => xterm(9),
        Color::LightGreen => xterm(10),
        Color::LightYellow => xterm(11),
        Color::LightBlue => xterm(12),
        Color::LightMagenta => xterm(13),
        Color::LightCyan => xterm(14),
        Color::White => xterm(15),
        Color::Indexed(i) => xterm(i),
        Color::Rgb(r, g, b) => [r, g, b],
    }
}

fn paint(buf: &Buffer, fonts: &Fonts<'_>, path: &Path) {
    let (cols, rows) = (buf.area.width as u32, buf.area.height as u32);
    let (w, h) = (cols * CELL_W, rows * CELL_H);
    let mut px = vec![0u8; (w * h * 3) as usize];
    for y in 0..rows {
        for x in 0..cols {
            let cell = &buf[(x as u16, y as u16)];
            let mut fg = rgb(cell.fg, FG);
            let mut bg = rgb(cell.bg, BG);
            if cell.modifier.contains(Modifier::REVERSED) {
                std::mem::swap(&mut fg, &mut bg);
            }
            if cell.modifier.contains(Modifier::DIM) {
                fg = [0, 1, 2].map(|i| ((fg[i] as u16 + bg[i] as u16) / 2) as u8);
            }
            let (x0, y0) = (x * CELL_W, y * CELL_H);
            for yy in y0..y0 + CELL_H {
                for xx in x0..x0 + CELL_W {
                    let i = ((yy * w + xx) * 3) as usize;
                    px[i..i + 3].copy_from_slice(&bg);
                }
            }
            let mut put = |xx: u32, yy: u32, a: f32| {
                if xx < w && yy < h {
                    let i = ((yy * w + xx) * 3) as usize;
                    for k in 0..3 {
                        let v = px[i + k] as f32 * (1.0 - a) + fg[k] as f32 * a;
                        px[i + k] = v.round() as u8;
                    }
                }
            };
            if let Some(ch) = cell.symbol().chars().next().filter(|c| *c != ' ') {
                let font = if cell.modifier.contains(Modifier::BOLD) {
                    &fonts.bold
                } else if cell.modifier.contains(Modifier::ITALIC) {
                    &fonts.italic
                } else {
                    &fonts.regular
                };
                let font = if font.glyph_id(ch).0 == 0 {
                    &fonts.fallback
                } else {
                    font
                };
                let scaled = font.as_scaled(PxScale::from(SCALE));
                let glyph = font.glyph_id(ch).with_scale_and_position(
                    SCALE,
                    point(x0 as f32, y0 as f32 + 2.0 + scaled.ascent()),
                );
                if let Some(og) = font.outline_glyph(glyph) {
                    let b = og.px_bounds();
                    og.draw(|gx, gy, a| {
                        let xx = b.min.x as i32 + gx as i32;
                        let yy = b.min.y as i32 + gy as i32;
                        if xx >= 0 && yy >= 0 {
                            put(xx as u32, yy as u32, a.min(1.0));
                        }
                    });
                }
            }
            if cell.modifier.contains(Modifier::UNDERLINED) {
                for xx in x0..x0 + CELL_W {
                    put(xx, y0 + CELL_H - 3, 1.0);
                }
            }
            if cell.modifier.contains(Modifier::CROSSED_OUT) {
                for xx in x0..x0 + CELL_W {
                    put(xx, y0 + CELL_H / 2 + 1, 1.0);
                }
            }
        }
    }
    let file = std::fs::File::create(path).unwrap();
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::High);
    enc.write_header().unwrap().write_image_data(&px).unwrap();
    println!("wrote {} ({w}×{h})", path.display());
}

fn render(app: &App) -> Buffer {
    let mut t = Terminal::new(TestBackend::new(app.size.0, app.size.1)).unwrap();
    t.draw(|f| ui::render(app, f)).unwrap();
    t.backend().buffer().clone()
}

fn demo(size: (u16, u16)) -> App {
    let demo = Demo::default();
    let batch = load_bytes(demo.file_name(), demo.bytes(), &LoadOptions::default()).unwrap();
    let text = gyre_text::resolve_tokenizer(None, batch.tokenizer_spec()).unwrap();
    let mut app = App::new(
        format!("demo: {}", demo.file_name()),
        Settings::default(),
        Theme { color: true },
    );
    app.step(Action::Resize(size.0, size.1));
    app.step(Action::Text(text));
    app.step(Action::Loaded(Ok(Box::new(batch))));
    app
}

fn steps(app: &mut App, cs: &[C]) {
    for &c in cs {
        app.step(Action::Cmd(c));
    }
}

fn open(app: &mut App, exec: &str) {
    let i = app
        .data
        .as_ref()
        .unwrap()
        .batch
        .execution_index(exec)
        .unwrap();
    app.apply(Effect::OpenExec(i));
}

fn main() {
    let fonts = Fonts {
        regular: FontRef::try_from_slice(dejavu::sans_mono::regular()).unwrap(),
        bold: FontRef::try_from_slice(dejavu::sans_mono::bold()).unwrap(),
        italic: FontRef::try_from_slice(dejavu::sans_mono::oblique()).unwrap(),
        fallback: FontRef::try_from_slice(dejavu::sans::regular()).unwrap(),
    };
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("screenshots");
    std::fs::create_dir_all(&out).unwrap();
    let size = (200, 56);

    // 1. Overview: opens at draw n/n on the execution with the most draws.
    let app = demo(size);
    paint(&render(&app), &fonts, &out.join("overview.png"));

    // 2. Replay mid-way: draw 2, the random value, the slices, the claimed spans as links.
    let mut app = demo(size);
    steps(
        &mut app,
        &[C::DrawFirst, C::DrawNext, C::DrawNext, C::Jump(3), C::Down],
    );
    paint(&render(&app), &fonts, &out.join("replay.png"));

    // 3. Provenance audit: colour by provenance, cursor on a tool result, the why line says why.
    let mut app = demo(size);
    while app.colour != gyre_engine::paint::ColorMode::Provenance {
        steps(&mut app, &[C::Colour]);
    }
    steps(&mut app, &[C::Search]);
    for ch in "src/csv.rs:9".chars() {
        app.step(Action::Input(ch));
    }
    app.step(Action::Cmd(C::Enter));
    app.focus = Pane::Tokens;
    paint(&render(&app), &fonts, &out.join("provenance.png"));

    // 4. Why was this path not drawn: a request whose output lies below another's.
    let mut app = demo(size);
    steps(
        &mut app,
        &[C::Jump(2), C::Home, C::Down, C::Down, C::Down, C::Why],
    );
    paint(&render(&app), &fonts, &out.join("why.png"));

    // 5. The scoring story of an excluded execution after a settings change; the detail pane
    // shows the selected assessment.
    let mut app = demo(size);
    steps(&mut app, &[C::JmaxDown, C::JmaxDown]);
    open(&mut app, "e0004");
    steps(&mut app, &[C::Jump(4), C::End]);
    paint(&render(&app), &fonts, &out.join("assessments.png"));

    // 6. The whole draw log, zoomed.
    let mut app = demo(size);
    steps(&mut app, &[C::Jump(3), C::ReplayLog, C::Zoom]);
    paint(&render(&app), &fonts, &out.join("draw-log.png"));

    // 7. Search across every execution, results listed while typing.
    let mut app = demo(size);
    app.step(Action::Cmd(C::Search));
    for ch in "from_line".chars() {
        app.step(Action::Input(ch));
    }
    paint(&render(&app), &fonts, &out.join("search.png"));

    // 8. Help overlay generated from the key table, with the glossary.
    let mut app = demo(size);
    app.step(Action::Cmd(C::Help));
    paint(&render(&app), &fonts, &out.join("help.png"));

    // 9. A 80×24 terminal.
    let app = demo((80, 24));
    paint(&render(&app), &fonts, &out.join("small-80x24.png"));

    // 10. The lens at J_max 2: how often each token is a target over 64 seeds; the cursor on a
    // left-out token says which J_max and priority would train on it.
    let mut app = demo(size);
    steps(&mut app, &[C::JmaxDown, C::JmaxDown, C::JmaxDown]);
    while app.colour != gyre_engine::paint::ColorMode::Lens {
        steps(&mut app, &[C::Colour]);
    }
    steps(&mut app, &[C::Jump(5), C::NextLeftOut]);
    paint(&render(&app), &fonts, &out.join("lens.png"));

    // 11. Pinned at J_max 5, compared at J_max 2.
    let mut app = demo(size);
    steps(
        &mut app,
        &[C::Pin, C::JmaxDown, C::JmaxDown, C::JmaxDown, C::Compare],
    );
    paint(&render(&app), &fonts, &out.join("compare.png"));

    // 12. The trainer's-eye row of draw 2.
    let mut app = demo(size);
    app.apply(Effect::Step(2));
    steps(&mut app, &[C::Row]);
    paint(&render(&app), &fonts, &out.join("row.png"));

    // 13. The batch dashboard, the cost and coverage curve focused.
    let mut app = demo(size);
    steps(&mut app, &[C::Dashboard, C::FocusPrev, C::Home, C::Right]);
    paint(&render(&app), &fonts, &out.join("dashboard.png"));

    // 14. Tree navigation: the tree filtered to the requests that call Task, and the detail
    // pane's link to the sub-agent the call started (Enter follows it).
    let mut app = demo(size);
    let i = app
        .data
        .as_ref()
        .unwrap()
        .batch
        .executions
        .iter()
        .position(|e| e.requests.iter().any(|r| r.agent != "main"))
        .unwrap();
    app.apply(Effect::OpenExec(i));
    steps(&mut app, &[C::TreeFilter]);
    app.step(Action::ClearField);
    for ch in "tree-filter Task".chars() {
        app.step(Action::Input(ch));
    }
    steps(&mut app, &[C::Enter, C::Jump(6)]);
    paint(&render(&app), &fonts, &out.join("tree-navigation.png"));
}
