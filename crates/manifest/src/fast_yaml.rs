//! A fast reader for the YAML that manifests are written in: block mappings and sequences,
//! single-line plain and quoted scalars, literal block scalars, single-line flow collections,
//! comments and `---` separators. It builds the JSON value and the location tree in one pass.
//!
//! It is an accelerator, not a second YAML implementation: whenever it meets anything else
//! (anchors, aliases, tags, folded or multi-line scalars, tabs, directives, duplicate keys,
//! anything it would have to call an error, sizes near a limit) it gives up on the whole file
//! and `parse` reads it with serde-saphyr, which also words every error. The reader must
//! therefore only ever produce exactly what the serde-saphyr path produces; the differential
//! tests in `fast_yaml_check` hold it to that.

use serde_json::{Map, Number, Value};

use crate::limits::Limits;
use crate::loc_tree::{KeyText, LocNode, LocTree, NodeShape};
use crate::location::Loc;
use crate::plain_scalar::{self, PlainValue};

/// One document read by the fast path.
#[derive(Clone, Debug, PartialEq)]
pub struct FastDocument {
    pub value: Value,
    pub tree: LocTree,
}

/// The file is left to serde-saphyr; `line` is where the reader gave up (for tests and tuning).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unsupported {
    pub line: u32,
}

/// Inside the reader: give up (the line is added by [`read`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bail;

type Read<T> = Result<T, Bail>;

/// Nodes of a typical manifest: the tree grows past it at most a few times.
const TREE_CAPACITY: usize = 64;

/// Longest implicit key YAML allows.
const MAX_KEY_CHARS: usize = 1024;

/// Reads every non-empty document of `text`, or gives up.
pub fn read(text: &str, limits: &Limits) -> Result<Vec<FastDocument>, Unsupported> {
    check_characters(text).map_err(|_| Unsupported { line: 0 })?;
    let mut reader = Reader {
        source: text,
        bytes: text.as_bytes(),
        pos: 0,
        line: 1,
        line_start: 0,
        tree: Vec::with_capacity(TREE_CAPACITY),
        items: Vec::with_capacity(32),
        entries: Vec::with_capacity(32),
        depth: 0,
        nodes: 0,
        // Far enough below serde-saphyr's budgets that whatever it would reject, the fast path
        // has given up on first, however the two count.
        max_depth: limits.max_depth / 2,
        max_nodes: limits.max_nodes / 4,
    };
    let mut documents = Vec::new();
    reader
        .documents(limits, &mut documents)
        .map_err(|_| Unsupported { line: reader.line })?;
    Ok(documents)
}

impl Reader<'_> {
    fn documents(&mut self, limits: &Limits, documents: &mut Vec<FastDocument>) -> Read<()> {
        let mut markers = 0usize;
        loop {
            match self.next_line() {
                LineStart::End => break,
                LineStart::DocumentStart => {
                    markers += 1;
                    if markers > limits.max_documents / 2 {
                        return Err(Bail);
                    }
                    self.pos += 3;
                    self.finish_line()?;
                }
                LineStart::Content(indent) => {
                    let value = self.block_node(-1, indent)?;
                    // A scalar document would be skipped (null) or is rare: leave it to serde-saphyr.
                    if !(value.is_object() || value.is_array()) {
                        return Err(Bail);
                    }
                    if matches!(self.next_line(), LineStart::Content(_)) {
                        return Err(Bail);
                    }
                    documents.push(FastDocument {
                        value,
                        tree: LocTree {
                            nodes: std::mem::replace(
                                &mut self.tree,
                                Vec::with_capacity(TREE_CAPACITY),
                            ),
                        },
                    });
                    if documents.len() > limits.max_documents / 2 {
                        return Err(Bail);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Control characters, tabs, carriage returns and the Unicode characters YAML treats specially
/// (NEL, line and paragraph separators, BOM, non-characters) are left to serde-saphyr.
fn check_characters(text: &str) -> Read<()> {
    let bytes = text.as_bytes();
    // Chunked and branch-free inside a chunk, so the compiler vectorises it.
    let special = |chunk: &[u8]| {
        chunk.iter().fold(false, |found, b| {
            found | ((*b < 0x20) & (*b != b'\n')) | (*b == 0x7f)
        })
    };
    if bytes.chunks(64).any(special) {
        return Err(Bail);
    }
    if !text.is_ascii()
        && text.chars().any(|c| {
            ('\u{80}'..='\u{9f}').contains(&c)
                || matches!(
                    c,
                    '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                )
        })
    {
        return Err(Bail);
    }
    Ok(())
}

enum LineStart {
    /// The next content line starts at this column (0-based); `pos` is at its first character.
    Content(usize),
    /// `---` at the start of the next content line; `pos` is at it.
    DocumentStart,
    End,
}

struct Reader<'a> {
    source: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// 1-based line of `pos`, and the byte offset where that line starts.
    line: u32,
    line_start: usize,
    tree: Vec<LocNode>,
    /// Values and mapping entries of the collections being read, innermost last.
    items: Vec<Value>,
    entries: Vec<(String, Value)>,
    depth: usize,
    nodes: usize,
    max_depth: usize,
    max_nodes: usize,
}

impl<'a> Reader<'a> {
    fn byte(&self, at: usize) -> u8 {
        self.bytes.get(at).copied().unwrap_or(b'\n')
    }

    fn at_line_end(&self, at: usize) -> bool {
        at >= self.bytes.len() || self.bytes[at] == b'\n'
    }

    /// A space or the end of the line follows `at - 1`.
    fn blank_at(&self, at: usize) -> bool {
        self.at_line_end(at) || self.bytes[at] == b' '
    }

    fn skip_spaces(&mut self) {
        while self.pos < self.bytes.len() && self.bytes[self.pos] == b' ' {
            self.pos += 1;
        }
    }

    fn loc(&self, at: usize) -> Loc {
        let prefix = &self.source[self.line_start..at];
        let column = if prefix.is_ascii() {
            prefix.len()
        } else {
            prefix.chars().count()
        };
        Loc {
            line: self.line,
            column: u32::try_from(column + 1).unwrap_or(u32::MAX),
        }
    }

    /// Moves past the end of the current line (`pos` must be at its `\n` or the end of input).
    fn next_line_start(&mut self) {
        if self.pos < self.bytes.len() {
            self.pos += 1;
            self.line += 1;
            self.line_start = self.pos;
        }
    }

    /// After a node: only spaces and a comment may remain on the line; moves to the next line.
    fn finish_line(&mut self) -> Read<()> {
        let before = self.pos;
        self.skip_spaces();
        if self.pos < self.bytes.len() && self.bytes[self.pos] == b'#' {
            // A comment must be separated from what precedes it.
            if self.pos == before && self.pos != self.line_start {
                return Err(Bail);
            }
            while !self.at_line_end(self.pos) {
                self.pos += 1;
            }
        }
        if !self.at_line_end(self.pos) {
            return Err(Bail);
        }
        self.next_line_start();
        Ok(())
    }

    /// Skips blank and comment-only lines (from a line start) and reports what comes next.
    fn next_line(&mut self) -> LineStart {
        loop {
            if self.pos >= self.bytes.len() {
                return LineStart::End;
            }
            self.skip_spaces();
            if self.at_line_end(self.pos) || self.bytes[self.pos] == b'#' {
                while !self.at_line_end(self.pos) {
                    self.pos += 1;
                }
                self.next_line_start();
                continue;
            }
            // Bytes, not characters: only spaces precede the content.
            let indent = self.pos - self.line_start;
            if indent == 0 {
                let rest = &self.bytes[self.pos..];
                if (rest.starts_with(b"---") || rest.starts_with(b"..."))
                    && self.blank_at(self.pos + 3)
                {
                    // `...` (document end) is rare enough to leave to serde-saphyr.
                    return if rest[0] == b'-' {
                        LineStart::DocumentStart
                    } else {
                        LineStart::Content(usize::MAX)
                    };
                }
            }
            return LineStart::Content(indent);
        }
    }

    fn enter(&mut self) -> Read<()> {
        self.depth += 1;
        self.nodes += 1;
        if self.depth > self.max_depth || self.nodes > self.max_nodes {
            return Err(Bail);
        }
        Ok(())
    }

    fn push_node(&mut self, at: usize, shape: NodeShape) -> usize {
        let loc = self.loc(at);
        self.tree.push(LocNode {
            key: None,
            value: loc,
            shape,
        });
        self.tree.len() - 1
    }

    fn set_children(&mut self, index: usize, children: usize) -> Read<()> {
        let children = u32::try_from(children).map_err(|_| Bail)?;
        if let Some(node) = self.tree.get_mut(index) {
            node.shape = NodeShape::Container { children };
        }
        Ok(())
    }

    /// A node that starts at column `column` of the current line, as the first thing on the line
    /// or after `- `: a block sequence, a block mapping, or a value on one line.
    fn block_node(&mut self, parent_indent: isize, column: usize) -> Read<Value> {
        if column == usize::MAX {
            return Err(Bail);
        }
        self.enter()?;
        let value = if self.sequence_entry_here() {
            self.block_sequence(column, false)?
        } else if self.key_here()? {
            self.block_mapping(column)?
        } else {
            self.inline_value(parent_indent)?
        };
        self.depth -= 1;
        Ok(value)
    }

    fn sequence_entry_here(&self) -> bool {
        self.byte(self.pos) == b'-' && self.blank_at(self.pos + 1)
    }

    /// Whether the rest of the line is `key: …` (a plain or quoted key and a `:` indicator).
    fn key_here(&self) -> Read<bool> {
        let mut at = self.pos;
        match self.byte(at) {
            quote @ (b'"' | b'\'') => {
                at = self.quoted_end(at, quote)?;
                while self.byte(at) == b' ' {
                    at += 1;
                }
                Ok(self.byte(at) == b':' && self.blank_at(at + 1))
            }
            // A flow collection as a key is left to serde-saphyr (via the value path).
            b'[' | b'{' => Ok(false),
            _ => {
                while !self.at_line_end(at) {
                    match self.bytes[at] {
                        b':' if self.blank_at(at + 1) => return Ok(true),
                        b'#' if at > self.pos && self.bytes[at - 1] == b' ' => return Ok(false),
                        _ => at += 1,
                    }
                }
                Ok(false)
            }
        }
    }

    /// `indentless`: the sequence is a mapping value written at the key's own indentation.
    fn block_sequence(&mut self, indent: usize, indentless: bool) -> Read<Value> {
        let index = self.push_node(self.pos, NodeShape::Container { children: 0 });
        // Items and entries gather on shared stacks, so each collection is allocated once, at its
        // final size.
        let first_item = self.items.len();
        loop {
            // At `-`.
            self.pos += 1;
            self.skip_spaces();
            let inline = !(self.at_line_end(self.pos) || self.byte(self.pos) == b'#');
            if indentless && self.items.len() == first_item {
                // serde-saphyr places an indentless sequence at its first item (and any other
                // at its first `-`); a first item on the next line is left to it.
                if !inline {
                    return Err(Bail);
                }
                let loc = self.loc(self.pos);
                if let Some(node) = self.tree.get_mut(index) {
                    node.value = loc;
                }
            }
            let item = if !inline {
                self.finish_line()?;
                match self.next_line() {
                    LineStart::Content(column) if column != usize::MAX && column > indent => {
                        self.block_node(to_isize(indent), column)?
                    }
                    _ => return Err(Bail),
                }
            } else {
                let column = self.column_of(self.pos);
                self.block_node(to_isize(indent), column)?
            };
            self.items.push(item);
            match self.next_line() {
                LineStart::Content(column) if column == indent && self.sequence_entry_here() => {}
                LineStart::Content(column) if column != usize::MAX && column > indent => {
                    return Err(Bail);
                }
                _ => break,
            }
        }
        let items: Vec<Value> = self.items.drain(first_item..).collect();
        self.set_children(index, items.len())?;
        Ok(Value::Array(items))
    }

    fn column_of(&self, at: usize) -> usize {
        self.source[self.line_start..at].chars().count()
    }

    fn block_mapping(&mut self, indent: usize) -> Read<Value> {
        let index = self.push_node(self.pos, NodeShape::Container { children: 0 });
        let first_entry = self.entries.len();
        loop {
            let key_loc = self.loc(self.pos);
            let (key, key_text) = self.block_key()?;
            self.skip_spaces();
            let value_index = self.tree.len();
            let value = if self.at_line_end(self.pos) || self.byte(self.pos) == b'#' {
                self.finish_line()?;
                match self.next_line() {
                    LineStart::Content(column) if column != usize::MAX && column > indent => {
                        self.block_node(to_isize(indent), column)?
                    }
                    LineStart::Content(column)
                        if column == indent && self.sequence_entry_here() =>
                    {
                        self.enter()?;
                        let value = self.block_sequence(indent, true)?;
                        self.depth -= 1;
                        value
                    }
                    // An empty value: left to serde-saphyr, which decides where it is.
                    _ => return Err(Bail),
                }
            } else {
                self.enter()?;
                let value = self.inline_value(to_isize(indent))?;
                self.depth -= 1;
                value
            };
            if let Some(node) = self.tree.get_mut(value_index) {
                node.key = Some((key_loc, key_text));
            }
            self.entries.push((key, value));
            match self.next_line() {
                LineStart::Content(column) if column == indent => {
                    if self.sequence_entry_here() || !self.key_here()? {
                        return Err(Bail);
                    }
                }
                LineStart::Content(column) if column != usize::MAX && column > indent => {
                    return Err(Bail);
                }
                _ => break,
            }
        }
        self.set_children(index, self.entries.len() - first_entry)?;
        let mut object = Map::with_capacity(self.entries.len() - first_entry);
        for (key, value) in self.entries.drain(first_entry..) {
            // A duplicate key is left to serde-saphyr, which reports it.
            if object.insert(key, value).is_some() {
                return Err(Bail);
            }
        }
        Ok(Value::Object(object))
    }

    /// Reads `key:` (plain or quoted) and moves past the `:`.
    fn block_key(&mut self) -> Read<(String, KeyText)> {
        self.nodes += 1;
        let start = self.pos;
        let (key, text) = match self.byte(start) {
            quote @ (b'"' | b'\'') => {
                let (key, text) = self.quoted_key(quote)?;
                self.skip_spaces();
                (key, text)
            }
            first => {
                if is_indicator(first) || (first == b'?' && self.blank_at(start + 1)) {
                    return Err(Bail);
                }
                let mut end = start;
                while !(self.byte(end) == b':' && self.blank_at(end + 1)) {
                    if self.at_line_end(end) {
                        return Err(Bail);
                    }
                    end += 1;
                }
                self.pos = end;
                // An empty key (`: value`) is left to serde-saphyr.
                if end == start {
                    return Err(Bail);
                }
                while end > start && self.bytes[end - 1] == b' ' {
                    end -= 1;
                }
                self.plain_key(start, end)?
            }
        };
        if self.byte(self.pos) != b':' || self.pos - start > MAX_KEY_CHARS {
            return Err(Bail);
        }
        self.pos += 1;
        Ok((key, text))
    }

    /// A plain key as the JSON conversion writes it (`yes` → `true`, `1.50` → `1.5`).
    fn plain_key(&self, start: usize, end: usize) -> Read<(String, KeyText)> {
        let raw = &self.source[start..end];
        // `<<` merges a mapping into this one in serde-saphyr.
        if raw == "<<" {
            return Err(Bail);
        }
        let text = match plain_scalar::resolve(raw).ok_or(Bail)? {
            PlainValue::Str(s) => {
                return Ok((
                    s.to_string(),
                    KeyText::Source {
                        start: to_u32(start)?,
                        end: to_u32(end)?,
                    },
                ));
            }
            PlainValue::Null => "null".to_string(),
            PlainValue::Bool(b) => b.to_string(),
            PlainValue::Int(i) => i.to_string(),
            PlainValue::UInt(u) => u.to_string(),
            PlainValue::Float(f) => f.to_string(),
        };
        Ok((text.clone(), KeyText::Owned(text)))
    }

    fn quoted_key(&mut self, quote: u8) -> Read<(String, KeyText)> {
        let start = self.pos + 1;
        let (text, escaped) = self.quoted(quote)?;
        let key_text = if escaped {
            KeyText::Owned(text.clone())
        } else {
            KeyText::Source {
                start: to_u32(start)?,
                end: to_u32(start + text.len())?,
            }
        };
        Ok((text, key_text))
    }

    /// A value that starts and ends on this line (a literal block scalar's content follows it).
    fn inline_value(&mut self, parent_indent: isize) -> Read<Value> {
        let at = self.pos;
        let value = match self.byte(at) {
            b'|' => return self.literal_block(parent_indent),
            b'[' | b'{' => self.flow_node()?,
            quote @ (b'"' | b'\'') => {
                self.push_node(at, NodeShape::Scalar);
                Value::String(self.quoted(quote)?.0)
            }
            first => {
                if is_indicator(first)
                    || (matches!(first, b'-' | b'?' | b':') && self.blank_at(at + 1))
                {
                    return Err(Bail);
                }
                let mut end = at;
                while !self.at_line_end(end) {
                    match self.bytes[end] {
                        b':' if self.blank_at(end + 1) => return Err(Bail),
                        b'#' if self.bytes[end - 1] == b' ' => break,
                        _ => end += 1,
                    }
                }
                while self.bytes[end - 1] == b' ' {
                    end -= 1;
                }
                self.pos = end;
                self.push_node(at, NodeShape::Scalar);
                plain_value(&self.source[at..end])?
            }
        };
        self.finish_line()?;
        Ok(value)
    }

    /// The closing quote's index + 1 for a quoted scalar starting at `at`, on this line.
    fn quoted_end(&self, at: usize, quote: u8) -> Read<usize> {
        let mut i = at + 1;
        loop {
            if self.at_line_end(i) {
                return Err(Bail);
            }
            let b = self.bytes[i];
            if quote == b'"' && b == b'\\' {
                i += 2;
            } else if b == quote {
                if quote == b'\'' && self.byte(i + 1) == b'\'' {
                    i += 2;
                } else {
                    return Ok(i + 1);
                }
            } else {
                i += 1;
            }
        }
    }

    /// A single-line quoted scalar at `pos`; returns its text and whether escapes were resolved.
    fn quoted(&mut self, quote: u8) -> Read<(String, bool)> {
        let start = self.pos + 1;
        let end = self.quoted_end(self.pos, quote)?;
        self.pos = end;
        let body = &self.source[start..end - 1];
        let special = if quote == b'"' { '\\' } else { '\'' };
        if !body.contains(special) {
            return Ok((body.to_string(), false));
        }
        let mut text = String::with_capacity(body.len());
        let mut chars = body.chars();
        while let Some(c) = chars.next() {
            if c != special {
                text.push(c);
                continue;
            }
            let next = chars.next().ok_or(Bail)?;
            if quote == b'\'' {
                text.push(next);
                continue;
            }
            text.push(match next {
                '\\' => '\\',
                '"' => '"',
                '/' => '/',
                'n' => '\n',
                't' => '\t',
                'r' => '\r',
                '0' => '\0',
                ' ' => ' ',
                _ => return Err(Bail),
            });
        }
        Ok((text, true))
    }

    /// `|`, `|-` or `|+`, then its content lines (indented more than `parent_indent`).
    fn literal_block(&mut self, parent_indent: isize) -> Read<Value> {
        if parent_indent < 0 {
            return Err(Bail);
        }
        self.pos += 1;
        let chomping = self.byte(self.pos);
        if matches!(chomping, b'-' | b'+') {
            self.pos += 1;
        }
        if !self.blank_at(self.pos) {
            return Err(Bail);
        }
        self.finish_line()?;
        // The first content line sets the indentation; empty lines before it are left to
        // serde-saphyr (their indentation rules are subtle).
        let indent = self.bytes[self.pos..]
            .iter()
            .take_while(|b| **b == b' ')
            .count();
        if to_isize(indent) <= parent_indent || self.at_line_end(self.pos + indent) {
            return Err(Bail);
        }
        self.push_node(self.pos + indent, NodeShape::Scalar);
        // The content is never longer than the block's source: one allocation.
        let mut text = String::with_capacity(self.literal_extent(indent)? - self.pos);
        let mut trailing_breaks = 0usize;
        loop {
            // `str::find` on a byte-sized pattern searches word-wise (memchr).
            let line_end = self.source[self.pos..]
                .find('\n')
                .map(|i| self.pos + i)
                .ok_or(Bail)?;
            let line = &self.source[self.pos..line_end];
            let spaces = line.bytes().take_while(|b| *b == b' ').count();
            if spaces == line.len() && spaces <= indent {
                trailing_breaks += 1;
            } else if spaces == line.len() {
                // A line of spaces beyond the indentation: left to serde-saphyr.
                return Err(Bail);
            } else if spaces < indent {
                break;
            } else {
                for _ in 0..trailing_breaks {
                    text.push('\n');
                }
                trailing_breaks = 0;
                text.push_str(&line[indent..]);
                text.push('\n');
            }
            self.pos = line_end;
            self.next_line_start();
            if self.pos >= self.bytes.len() {
                break;
            }
        }
        match chomping {
            b'-' => {
                text.pop();
            }
            b'+' => {
                for _ in 0..trailing_breaks {
                    text.push('\n');
                }
            }
            _ => {}
        }
        Ok(Value::String(text))
    }

    /// Where the literal block starting at `pos` (content indentation `indent`) ends.
    fn literal_extent(&self, indent: usize) -> Read<usize> {
        let mut at = self.pos;
        while at < self.bytes.len() {
            let line_end = self.source[at..].find('\n').map(|i| at + i).ok_or(Bail)?;
            let line = &self.bytes[at..line_end];
            let spaces = line.iter().take_while(|b| **b == b' ').count();
            if spaces < indent && spaces < line.len() {
                break;
            }
            at = line_end + 1;
        }
        Ok(at)
    }

    /// A flow collection or scalar that ends on this line.
    fn flow_node(&mut self) -> Read<Value> {
        self.skip_spaces();
        self.enter()?;
        let at = self.pos;
        let value = match self.byte(at) {
            b'[' => self.flow_sequence(at)?,
            b'{' => self.flow_mapping(at)?,
            quote @ (b'"' | b'\'') => {
                self.push_node(at, NodeShape::Scalar);
                let text = self.quoted(quote)?.0;
                // `["a": 1]` is a single-pair mapping inside a sequence.
                self.skip_spaces();
                if self.byte(self.pos) == b':' {
                    return Err(Bail);
                }
                Value::String(text)
            }
            _ => {
                let (start, end) = self.flow_plain_span()?;
                self.push_node(start, NodeShape::Scalar);
                self.skip_spaces();
                if self.byte(self.pos) == b':' {
                    return Err(Bail);
                }
                plain_value(&self.source[start..end])?
            }
        };
        self.depth -= 1;
        Ok(value)
    }

    /// `[a, b]` starting at `at`.
    fn flow_sequence(&mut self, at: usize) -> Read<Value> {
        let index = self.push_node(at, NodeShape::Container { children: 0 });
        self.pos += 1;
        let mut items = Vec::new();
        if !self.flow_closed_empty(b']')? {
            loop {
                items.push(self.flow_node()?);
                if self.flow_item_ends(b']')? {
                    break;
                }
            }
        }
        self.set_children(index, items.len())?;
        Ok(Value::Array(items))
    }

    /// `{a: 1, b: 2}` starting at `at`.
    fn flow_mapping(&mut self, at: usize) -> Read<Value> {
        let index = self.push_node(at, NodeShape::Container { children: 0 });
        self.pos += 1;
        let mut object = Map::new();
        if !self.flow_closed_empty(b'}')? {
            loop {
                let (key, value) = self.flow_pair()?;
                if object.insert(key, value).is_some() {
                    return Err(Bail);
                }
                if self.flow_item_ends(b'}')? {
                    break;
                }
            }
        }
        self.set_children(index, object.len())?;
        Ok(Value::Object(object))
    }

    /// One `key: value` of a flow mapping.
    fn flow_pair(&mut self) -> Read<(String, Value)> {
        let key_loc = self.loc(self.pos);
        self.nodes += 1;
        let (key, key_text) = match self.byte(self.pos) {
            quote @ (b'"' | b'\'') => self.quoted_key(quote)?,
            _ => {
                let (start, end) = self.flow_plain_span()?;
                self.plain_key(start, end)?
            }
        };
        self.skip_flow_spaces()?;
        // Only `key: value`: YAML's rules for a `:` glued to what follows
        // (`a:[b]`, `"a":b`) depend on the key's kind; serde-saphyr knows them.
        if self.byte(self.pos) != b':' || !self.blank_at(self.pos + 1) {
            return Err(Bail);
        }
        self.pos += 1;
        self.skip_flow_spaces()?;
        if matches!(self.byte(self.pos), b',' | b'}') {
            return Err(Bail);
        }
        let value_index = self.tree.len();
        let value = self.flow_node()?;
        if let Some(node) = self.tree.get_mut(value_index) {
            node.key = Some((key_loc, key_text));
        }
        Ok((key, value))
    }

    /// After the opening bracket: true (and past it) when `close` follows at once.
    fn flow_closed_empty(&mut self, close: u8) -> Read<bool> {
        self.skip_flow_spaces()?;
        let empty = self.byte(self.pos) == close;
        if empty {
            self.pos += 1;
        }
        Ok(empty)
    }

    /// After an item: true (and past it) at `close`, false past a `,` with another item next;
    /// a trailing comma or anything else is left to serde-saphyr.
    fn flow_item_ends(&mut self, close: u8) -> Read<bool> {
        self.skip_flow_spaces()?;
        match self.byte(self.pos) {
            b',' => {
                self.pos += 1;
                self.skip_flow_spaces()?;
                if self.byte(self.pos) == close {
                    return Err(Bail);
                }
                Ok(false)
            }
            byte if byte == close => {
                self.pos += 1;
                Ok(true)
            }
            _ => Err(Bail),
        }
    }

    /// Spaces inside a flow collection; a line break or comment there is left to serde-saphyr.
    fn skip_flow_spaces(&mut self) -> Read<()> {
        self.skip_spaces();
        if self.at_line_end(self.pos) || self.byte(self.pos) == b'#' {
            return Err(Bail);
        }
        Ok(())
    }

    /// A plain scalar inside a flow collection: up to `,`, a bracket, `: ` or ` #`.
    fn flow_plain_span(&mut self) -> Read<(usize, usize)> {
        let start = self.pos;
        let first = self.byte(start);
        if is_indicator(first)
            || (matches!(first, b'-' | b'?' | b':') && self.flow_blank_at(start + 1))
        {
            return Err(Bail);
        }
        let mut end = start;
        while !self.at_line_end(end) {
            match self.bytes[end] {
                b',' | b'[' | b']' | b'{' | b'}' => break,
                b':' if self.flow_blank_at(end + 1) => break,
                b'#' if end > start && self.bytes[end - 1] == b' ' => return Err(Bail),
                _ => end += 1,
            }
        }
        self.pos = end;
        while end > start && self.bytes[end - 1] == b' ' {
            end -= 1;
        }
        if end == start {
            return Err(Bail);
        }
        Ok((start, end))
    }

    fn flow_blank_at(&self, at: usize) -> bool {
        self.blank_at(at) || matches!(self.bytes[at], b',' | b'[' | b']' | b'{' | b'}')
    }
}

/// Characters that cannot start a plain scalar (or that start a node this reader leaves to
/// serde-saphyr: anchors, aliases, tags, directives, block scalars).
fn is_indicator(first: u8) -> bool {
    matches!(
        first,
        b'&' | b'*'
            | b'!'
            | b'%'
            | b'@'
            | b'`'
            | b'|'
            | b'>'
            | b'\''
            | b'"'
            | b'#'
            | b','
            | b'['
            | b']'
            | b'{'
            | b'}'
    )
}

fn plain_value(text: &str) -> Read<Value> {
    Ok(match plain_scalar::resolve(text).ok_or(Bail)? {
        PlainValue::Null => Value::Null,
        PlainValue::Bool(b) => Value::Bool(b),
        PlainValue::Int(i) => Value::Number(Number::from(i)),
        PlainValue::UInt(u) => Value::Number(Number::from(u)),
        PlainValue::Float(f) => Value::Number(Number::from_f64(f).ok_or(Bail)?),
        PlainValue::Str(s) => Value::String(s.to_string()),
    })
}

fn to_isize(value: usize) -> isize {
    isize::try_from(value).unwrap_or(isize::MAX)
}

fn to_u32(value: usize) -> Read<u32> {
    u32::try_from(value).map_err(|_| Bail)
}
