//! LOLWUT: computer art and the version, as Redis 7.0.15 draws it (`lolwut.c`,
//! `lolwut5.c`, `lolwut6.c`). Without VERSION (or with a version that has no art) the
//! reply is just "Redis ver. 7.0.15"; VERSION 5 draws Georg Nees's Schotter in braille,
//! VERSION 6 a skyline in terminal colors. Both are random: the same drawing, with other
//! random numbers than Redis's `rand()` would give.

use crate::command::{CmdError, Ctx, Spec, FAST, READONLY};
use crate::families::collection::rand_below;

pub const COMMANDS: &[Spec] = &[Spec {
    name: "lolwut",
    arity: -1,
    flags: READONLY | FAST,
    first_key: 0,
    last_key: 0,
    step: 0,
    group: "server",
    summary: "Display some computer art and the Redis version",
    handler: cmd_lolwut,
}];

/// The version LOLWUT names (the one Larder presents itself as).
const VERSION: &str = "7.0.15";

/// C's `rand()`: 0 ..= RAND_MAX (2^31 - 1).
fn rand() -> i64 {
    rand_below(1 << 31) as i64
}

/// # Format
/// `LOLWUT [VERSION version] [arguments of that version's art]` → verbatim text (a bulk
/// string in RESP2). VERSION 5: `[columns [squares-per-row [squares-per-col]]]`, default 66
/// 8 12; VERSION 6: `[columns [rows]]`, default 80 20; each clamped as Redis clamps them.
fn cmd_lolwut(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let mut version = VERSION.to_string();
    let mut first = 1;
    if ctx.argc() >= 3 && ctx.arg(1).eq_ignore_ascii_case(b"version") {
        // Redis prints the number as an unsigned int ("%u.0.0").
        version = format!("{}.0.0", ctx.int(2)? as u32);
        first = 3;
    }
    // Which art, from the version string's first characters, as Redis picks it: 5.x and
    // 4.9 draw Schotter, 6.x and 5.9 the skyline.
    let v = version.as_bytes();
    let art = match (v[0], v[1] == b'.', v[2] == b'9') {
        (b'5', true, false) | (b'4', true, true) => 5,
        (b'6', true, false) | (b'5', true, true) => 6,
        _ => 0,
    };
    let args: Vec<&[u8]> = (first..ctx.argc()).map(|i| ctx.arg(i)).collect();
    let num = |i: usize, default: i64, max: i64| -> Result<i64, CmdError> {
        match args.get(i) {
            Some(a) => crate::command::parse_i64(a).ok_or_else(CmdError::not_integer).map(|n| n.clamp(1, max)),
            None => Ok(default),
        }
    };
    let text = if art == 5 {
        let (cols, row, col) = (num(0, 66, 1000)?, num(1, 8, 200)?, num(2, 12, 200)?);
        let canvas = schotter(cols as i32, row as i32, col as i32);
        format!("{}\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. {VERSION}\n", braille(&canvas))
    } else if art == 6 {
        let (cols, rows) = (num(0, 80, 1000)?, num(1, 20, 1000)?);
        let mut canvas = Canvas::new(cols as i32, rows as i32, 3);
        skyline(&mut canvas);
        format!(
            "{}\nDedicated to the 8 bit game developers of past and present.\nOriginal 8 bit image from Plaguemon by hikikomori. Redis ver. {VERSION}\n",
            colors(&canvas)
        )
    } else {
        format!("Redis ver. {VERSION}\n")
    };
    ctx.out.verbatim(b"txt", text.as_bytes());
    Ok(())
}

/// A grid of pixels, each a color (0..=3).
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, color: u8) -> Canvas {
        Canvas { width, height, pixels: vec![color; (width * height) as usize] }
    }

    fn set(&mut self, x: i32, y: i32, color: u8) {
        if x >= 0 && x < self.width && y >= 0 && y < self.height {
            self.pixels[(x + y * self.width) as usize] = color;
        }
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        if x >= 0 && x < self.width && y >= 0 && y < self.height {
            self.pixels[(x + y * self.width) as usize]
        } else {
            0
        }
    }

    /// Bresenham, as `lwDrawLine`.
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32, color: u8) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let (sx, sy) = (if x1 < x2 { 1 } else { -1 }, if y1 < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// `lwDrawSquare`: a square of side `size` centred on (x, y), turned by `angle`.
    #[allow(clippy::approx_constant)] // Redis's literal, not quite SQRT_2
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32, color: u8) {
        let size = ((size as f64 / 1.4142135623) as f32 as f64).round() as f32;
        let mut k: f32 = (std::f64::consts::FRAC_PI_4 + angle as f64) as f32;
        let (mut px, mut py) = ([0i32; 4], [0i32; 4]);
        for j in 0..4 {
            px[j] = ((k as f64).sin() * size as f64 + x as f64).round() as i32;
            py[j] = ((k as f64).cos() * size as f64 + y as f64).round() as i32;
            k = (k as f64 + std::f64::consts::FRAC_PI_2) as f32;
        }
        for j in 0..4 {
            self.line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4], color);
        }
    }
}

/// `lwDrawSchotter`: rows of squares, more and more turned and shifted going down.
fn schotter(cols: i32, per_row: i32, per_col: i32) -> Canvas {
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32 + (padding * 2) as f32) as i32;
    let mut c = Canvas::new(width, height, 0);
    let r = || rand() as f32 / 2147483647.0;
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle = 0.0f32;
            if y > 1 {
                let mut r1 = r() / per_col as f32 * y as f32;
                let mut r2 = r() / per_col as f32 * y as f32;
                let mut r3 = r() / per_col as f32 * y as f32;
                for v in [&mut r1, &mut r2, &mut r3] {
                    if rand() % 2 == 1 {
                        *v = -*v;
                    }
                }
                angle = r1;
                sx = (sx as f32 + r2 * side / 3.0) as i32;
                sy = (sy as f32 + r3 * side / 3.0) as i32;
            }
            c.square(sx, sy, side, angle, 1);
        }
    }
    c
}

/// LOLWUT 5's rendering: each 2x4 block of pixels one braille character.
fn braille(c: &Canvas) -> String {
    let mut out = String::new();
    let mut y = 0;
    while y < c.height {
        let mut x = 0;
        while x < c.width {
            let bits = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (0, 3), (1, 3)];
            let byte =
                bits.iter().enumerate().fold(0u32, |b, (i, &(dx, dy))| b | ((c.get(x + dx, y + dy) != 0) as u32) << i);
            out.push(char::from_u32(0x2800 + byte).expect("braille"));
            x += 2;
        }
        if y != c.height - 1 {
            out.push('\n');
        }
        y += 4;
    }
    out
}

/// `generateSkyscraper`: one building at `xoff`, windows in random grays.
fn skyscraper(c: &mut Canvas, xoff: i32, width: i32, height: i32, windows: bool, color: u8) {
    let start = c.height - 1;
    let end = start - height + 1;
    for y in (end..=start).rev() {
        for x in xoff..xoff + width {
            if y == end && (x <= xoff + 1 || x >= xoff + width - 2) {
                continue;
            }
            let mut col = color;
            if windows && x > xoff + 1 && x < xoff + width - 2 && y > end + 1 && y < start - 1 {
                let (relx, rely) = (x - (xoff + 1), y - (end + 1));
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    loop {
                        col = 1 + (rand() % 2) as u8;
                        if col != color {
                            break;
                        }
                    }
                    if relx % 2 != 0 {
                        col = c.get(x - 1, y);
                    }
                }
            }
            c.set(x, y, col);
        }
    }
}

/// `generateSkyline`: two rows of background buildings, then the foreground with windows.
fn skyline(c: &mut Canvas) {
    let h = c.height as i64;
    for color in [2u8, 1] {
        let mut offset = -10i64;
        while offset < c.width as i64 {
            offset += rand() % 8;
            let width = 10 + rand() % 9;
            let height = if color == 2 { h / 2 + (rand() % h) / 2 } else { h / 2 + (rand() % h) / 3 };
            skyscraper(c, offset as i32, width as i32, height as i32, false, color);
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut offset = -10i64;
    while offset < c.width as i64 {
        offset += rand() % 8;
        let mut width = 5 + rand() % 14;
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = h / 3 + (rand() % h) / 2;
        skyscraper(c, offset as i32, width as i32, height as i32, true, 0);
        offset += width + 5;
    }
}

/// LOLWUT 6's rendering: each pixel a space in one of four terminal grays.
fn colors(c: &Canvas) -> String {
    let mut out = String::new();
    for y in 0..c.height {
        for x in 0..c.width {
            let ce = match c.get(x, y) {
                1 => "0;90;100m",
                2 => "0;37;47m",
                3 => "0;97;107m",
                _ => "0;30;40m",
            };
            out.push_str(&format!("\x1b[{ce} \x1b[0m"));
        }
        if y != c.height - 1 {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis 7.0.15's LOLWUT VERSION 5 with its defaults is 49 lines of 66 braille
    /// characters (a canvas of 132 x 196 pixels), an empty line, then the caption.
    #[test]
    fn schotter_has_redis_dimensions() {
        let c = schotter(66, 8, 12);
        assert_eq!((c.width, c.height), (132, 196));
        let text = braille(&c);
        let lines: Vec<&str> = text.split('\n').collect();
        assert_eq!(lines.len(), 50);
        assert_eq!(lines[49], "");
        assert!(lines[..49].iter().all(|l| l.chars().count() == 66));
        // The top two rows of squares are not turned: the first line is the same each time.
        assert_eq!(lines[0], braille(&schotter(66, 8, 12)).split('\n').next().unwrap());
    }

    /// Random art: checked on many drawings.
    #[test]
    fn skyline_fills_the_canvas() {
        for _ in 0..200 {
            let mut c = Canvas::new(80, 20, 3);
            skyline(&mut c);
            let text = colors(&c);
            assert_eq!(text.split('\n').count(), 20);
            assert_eq!(text.matches("\x1b[0m").count(), 80 * 20);
            // Buildings stand on the bottom row (with gaps between some, as in Redis), and
            // the top row is sky: no building is taller than the canvas.
            assert!((0..80).filter(|&x| c.get(x, 19) != 3).count() > 40);
            assert!((0..80).all(|x| c.get(x, 0) == 3));
        }
    }
}
