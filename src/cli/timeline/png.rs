//! PNG: the SVG rendered by resvg, with the system's fonts.

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

/// Render `svg` to PNG bytes at its own size. Without any font on the system the PNG has bars but
/// no text: say so on stderr rather than hand out a picture that silently lost its labels.
pub fn render(svg: &str) -> Result<Vec<u8>, PngError> {
    let mut options = usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    if options.fontdb.is_empty() {
        eprintln!(
            "warning: no fonts found on this system: the PNG has no text (install one, e.g. \
             the Debian package fonts-dejavu-core, or use -o svg)"
        );
    }
    let tree = usvg::Tree::from_str(svg, &options)?;
    let size = tree.size().to_int_size();
    let (width, height) = (size.width(), size.height());
    let mut pixmap =
        tiny_skia::Pixmap::new(width, height).ok_or(PngError::Size { width, height })?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap
        .encode_png()
        .map_err(|error| PngError::Encode(error.to_string()))
}
