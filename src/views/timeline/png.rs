//! PNG: the SVG rendered by resvg, with the system's fonts.

use resvg::usvg::fontdb::Database;
use resvg::{tiny_skia, usvg};

#[derive(Debug, thiserror::Error)]
pub enum PngError {
    #[error("cannot read the timeline's SVG: {0}")]
    Svg(#[from] usvg::Error),
    #[error("cannot allocate a {width}x{height} picture")]
    Size { width: u32, height: u32 },
    #[error("cannot encode the PNG: {0}")]
    Encode(String),
}

/// Said when no font is found: the PNG has bars but no text.
pub const NO_FONTS: &str = "no fonts found on this system: the PNG has no text (install one, \
     e.g. the Debian package fonts-dejavu-core, or use -o svg)";

/// A rendered PNG, and what the reader must be told about it.
pub struct Rendered {
    pub png: Vec<u8>,
    pub warning: Option<&'static str>,
}

/// Render `svg` to PNG bytes at its own size with the system's fonts.
pub fn render(svg: &str) -> Result<Rendered, PngError> {
    let mut fonts = Database::new();
    fonts.load_system_fonts();
    render_with(svg, fonts)
}

/// Render with `fonts`. Without any font the picture silently loses its labels, so the result
/// carries a warning saying why.
pub fn render_with(svg: &str, fonts: Database) -> Result<Rendered, PngError> {
    let warning = fonts.is_empty().then_some(NO_FONTS);
    let options = usvg::Options {
        fontdb: std::sync::Arc::new(fonts),
        ..usvg::Options::default()
    };
    let tree = usvg::Tree::from_str(svg, &options)?;
    let size = tree.size().to_int_size();
    let (width, height) = (size.width(), size.height());
    let mut pixmap =
        tiny_skia::Pixmap::new(width, height).ok_or(PngError::Size { width, height })?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    let png = pixmap
        .encode_png()
        .map_err(|error| PngError::Encode(error.to_string()))?;
    Ok(Rendered { png, warning })
}
