//! `--plot FILE.png`: the same SVG every plot draws, rasterized with resvg.
//!
//! The plots name their font family `sans-serif`; a PNG needs glyphs, and a fresh server
//! often has no fonts installed, so `DejaVu Sans` is built in (`assets/DejaVuSans.ttf`, 760 KB;
//! its licence is beside it) and is the only font the renderer sees: the picture is the same
//! on every machine. Drawn at twice the SVG's size, on white, for sharp text.

use std::path::Path;

/// `DejaVu Sans` (Bitstream Vera licence; the `DejaVu` changes are public domain: `assets/`).
#[cfg(feature = "png")]
const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Pixels per SVG unit.
#[cfg(feature = "png")]
const SCALE: f32 = 2.0;

/// The file kinds `--plot` writes, told by the name's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotFormat {
    Svg,
    Png,
}

/// The format for `path`, or why it has none (checked when the options are parsed, before
/// a benchmark runs for minutes).
pub fn plot_format(path: &Path) -> Result<PlotFormat, String> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("svg") => Ok(PlotFormat::Svg),
        Some("png") if cfg!(feature = "png") => Ok(PlotFormat::Png),
        Some("png") => Err(format!(
            "{}: this till was built without PNG plots (the `png` feature); name the file \
             *.svg, or build till with its default features",
            path.display()
        )),
        _ => Err(format!(
            "{}: --plot writes an SVG or a PNG picture; name the file *.svg or *.png",
            path.display()
        )),
    }
}

/// The clap parser of every `--plot` option.
pub fn parse_plot_path(text: &str) -> Result<std::path::PathBuf, String> {
    let path = std::path::PathBuf::from(text);
    plot_format(&path)?;
    Ok(path)
}

/// Without the `png` feature no plot is a PNG (`plot_format` refuses the name).
#[cfg(not(feature = "png"))]
pub fn render(_svg: &str) -> Result<Vec<u8>, String> {
    Err("this till was built without PNG plots (the `png` feature)".to_owned())
}

/// Renders `svg` (one of the plots) to PNG bytes.
#[cfg(feature = "png")]
pub fn render(svg: &str) -> Result<Vec<u8>, String> {
    let mut options = resvg::usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_font_data(FONT.to_vec());
    fonts.set_sans_serif_family("DejaVu Sans");
    let tree = resvg::usvg::Tree::from_str(svg, &options)
        .map_err(|e| format!("the plot's SVG does not parse: {e}"))?;
    let size = tree
        .size()
        .to_int_size()
        .scale_by(SCALE)
        .ok_or("the plot has no size")?;
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or("the plot is too large to draw")?;
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::from_scale(SCALE, SCALE),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| format!("cannot encode the plot as PNG: {e}"))
}

/// Writes `svg` to `path` as SVG or PNG, by its extension.
pub fn write_plot(path: &Path, svg: &str) -> Result<(), String> {
    let bytes = match plot_format(path)? {
        PlotFormat::Svg => svg.as_bytes().to_vec(),
        PlotFormat::Png => render(svg)?,
    };
    std::fs::write(path, bytes)
        .map_err(|e| format!("cannot write the plot to {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "png")]
    const SVG: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"120\" height=\"40\" \
                       viewBox=\"0 0 120 40\" font-family=\"sans-serif\">\
                       <rect x=\"0\" y=\"0\" width=\"60\" height=\"40\" fill=\"#1f77b4\"/>\
                       <text x=\"64\" y=\"28\" font-size=\"20\">Ag</text></svg>";

    #[cfg(feature = "png")]
    #[test]
    fn a_plot_renders_to_a_png_with_its_shapes_and_text() {
        let png = render(SVG).expect("renders");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
        let pixmap = resvg::tiny_skia::Pixmap::decode_png(&png).expect("decodes");
        assert_eq!(
            (pixmap.width(), pixmap.height()),
            (240, 80),
            "twice the SVG size"
        );
        let at = |x: u32, y: u32| pixmap.pixel(x, y).expect("inside").demultiply();
        let blue = at(10, 10);
        assert_eq!((blue.red(), blue.green(), blue.blue()), (0x1f, 0x77, 0xb4));
        let white = at(238, 2);
        assert_eq!((white.red(), white.green(), white.blue()), (255, 255, 255));
        // The text was drawn with the built-in font: dark pixels right of the rectangle.
        let inked = (130..240)
            .flat_map(|x| (0..80).map(move |y| (x, y)))
            .filter(|&(x, y)| at(x, y).red() < 128)
            .count();
        assert!(inked > 50, "no glyphs drawn ({inked} dark pixels)");
    }

    #[test]
    fn the_plot_format_is_the_extension() {
        assert_eq!(plot_format(Path::new("a/b.svg")), Ok(PlotFormat::Svg));
        if cfg!(feature = "png") {
            assert_eq!(plot_format(Path::new("b.PNG")), Ok(PlotFormat::Png));
        } else {
            let err = plot_format(Path::new("b.png")).expect_err("no PNG support");
            assert!(err.contains("png` feature"), "{err}");
        }
        let err = plot_format(Path::new("plot.jpg")).expect_err("refused");
        assert!(err.contains("plot.jpg") && err.contains("*.png"), "{err}");
        assert!(parse_plot_path("noext").is_err());
    }
}
