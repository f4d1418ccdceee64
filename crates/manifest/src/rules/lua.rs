//! Compile-only checks of Sveltos health-check Lua scripts.
//!
//! Sveltos runs `validateHealths[].script` with Lua 5.1 semantics and calls the global
//! `evaluate()`, which must return `{healthy = <bool>, message = <string>}`. tollgate validates
//! scripts before they reach a cluster, so it compiles them with a real Lua 5.1 (never running
//! them) and adds two lexical facts the validator turns into findings.

use mlua::chunk::ChunkMode;
use mlua::{Lua, LuaOptions, StdLib};

/// Chunk name given to Lua; its error messages start with `[string "script"]:<line>:`.
const CHUNK_NAME: &str = "script";
/// The prefix Lua 5.1 puts before the line number of a syntax error in [`CHUNK_NAME`].
const CHUNK_PREFIX: &str = "[string \"script\"]:";

/// A Lua syntax error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LuaError {
    /// 1-based line inside the script, 0 if unknown.
    pub line: u32,
    /// Lua's message without the chunk-name and line prefix.
    pub message: String,
}

/// What tollgate can tell about a health-check script without running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LuaCheck {
    /// The syntax error, if the script does not compile as Lua 5.1.
    pub error: Option<LuaError>,
    /// The script defines a global function `evaluate` (Sveltos calls it).
    pub defines_evaluate: bool,
    /// The identifier `healthy` appears outside comments and strings (or as `["healthy"]`).
    pub sets_healthy: bool,
}

/// Compiles `script` as Lua 5.1 without executing it, and inspects its tokens.
pub fn check_lua_script(script: &str) -> LuaCheck {
    let tokens = tokenize(script);
    LuaCheck {
        error: compile_error(script),
        defines_evaluate: defines_global_evaluate(&tokens),
        sets_healthy: mentions_healthy(&tokens),
    }
}

/// Loads the script into a fresh, library-less Lua state. Loading compiles only; the returned
/// function is dropped uncalled, so user code never runs.
fn compile_error(script: &str) -> Option<LuaError> {
    let lua = match Lua::new_with(StdLib::NONE, LuaOptions::default()) {
        Ok(lua) => lua,
        Err(err) => {
            return Some(LuaError {
                line: 0,
                message: format!("cannot create a Lua state: {err}"),
            });
        }
    };
    // Text mode: a script starting with the bytecode signature must not be loaded as bytecode,
    // which Lua does not verify.
    let loaded = lua
        .load(script)
        .set_name(CHUNK_NAME)
        .set_mode(ChunkMode::Text)
        .into_function();
    match loaded {
        Ok(_) => None,
        Err(mlua::Error::SyntaxError { message, .. }) => Some(split_message(&message, script)),
        Err(other) => Some(LuaError {
            line: 0,
            message: other.to_string(),
        }),
    }
}

/// Turns `[string "script"]:3: msg` into line 3 and `msg`. Lua reports errors at end of input
/// one line past a trailing newline; the line is clamped to the script so it maps onto a real
/// line of the manifest.
fn split_message(raw: &str, script: &str) -> LuaError {
    let unknown = || LuaError {
        line: 0,
        message: raw.to_string(),
    };
    let Some(rest) = raw.strip_prefix(CHUNK_PREFIX) else {
        return unknown();
    };
    let Some((digits, message)) = rest.split_once(':') else {
        return unknown();
    };
    let Ok(line) = digits.parse::<u32>() else {
        return unknown();
    };
    let last_line = u32::try_from(script.lines().count().max(1)).unwrap_or(u32::MAX);
    LuaError {
        line: line.min(last_line),
        message: message.trim_start().to_string(),
    }
}

/// A Lua 5.1 token, as far as the lexical checks need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    /// An identifier or keyword.
    Name(&'a str),
    /// The raw contents of a quoted or long-bracket string (escapes left as written).
    Str(&'a str),
    /// Punctuation or an operator, multi-character ones (`==`, `..`) as one token.
    Symbol(&'a str),
    /// A numeral; its value does not matter.
    Number,
    /// A byte Lua would reject (non-ASCII outside strings); kept so neighbours stay apart.
    Other,
}

/// A small Lua 5.1 lexer that skips comments and keeps strings apart from code. It never fails:
/// malformed input is the compiler's business. One match on the first byte of each token, as
/// Lua's own lexer is written: it reads better whole, every token's rule side by side.
fn tokenize(src: &str) -> Vec<Token<'_>> {
    let bytes = src.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        match byte {
            b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c => i += 1,
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                i += 2;
                match long_bracket_level(bytes, i) {
                    Some(level) => i = long_bracket_end(bytes, i, level).1,
                    None => {
                        while i < bytes.len() && bytes[i] != b'\n' {
                            i += 1;
                        }
                    }
                }
            }
            b'[' => match long_bracket_level(bytes, i) {
                Some(level) => {
                    let (content_end, next) = long_bracket_end(bytes, i, level);
                    let content_start = (i + level + 2).min(content_end);
                    tokens.push(Token::Str(&src[content_start..content_end]));
                    i = next;
                }
                None => {
                    tokens.push(Token::Symbol("["));
                    i += 1;
                }
            },
            b'"' | b'\'' => {
                let start = i + 1;
                i = start;
                // An unterminated string ends at the line break, as in Lua's lexer.
                while i < bytes.len() && bytes[i] != byte && bytes[i] != b'\n' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                let end = i.min(bytes.len());
                tokens.push(Token::Str(&src[start..end]));
                i = end + usize::from(end < bytes.len() && bytes[end] == byte);
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                tokens.push(Token::Name(&src[start..i]));
            }
            b'0'..=b'9' => {
                i = numeral_end(bytes, i);
                tokens.push(Token::Number);
            }
            b'.' if bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                i = numeral_end(bytes, i);
                tokens.push(Token::Number);
            }
            b'.' => {
                let len = bytes[i..]
                    .iter()
                    .take(3)
                    .take_while(|b| **b == b'.')
                    .count();
                tokens.push(Token::Symbol(&src[i..i + len]));
                i += len;
            }
            b'=' | b'~' | b'<' | b'>' if bytes.get(i + 1) == Some(&b'=') => {
                tokens.push(Token::Symbol(&src[i..i + 2]));
                i += 2;
            }
            _ if byte.is_ascii() => {
                tokens.push(Token::Symbol(&src[i..i + 1]));
                i += 1;
            }
            _ => {
                tokens.push(Token::Other);
                i += 1;
            }
        }
    }
    tokens
}

/// If a long bracket `[`, `=`*level, `[` opens at `start`, its level.
fn long_bracket_level(bytes: &[u8], start: usize) -> Option<usize> {
    if bytes.get(start) != Some(&b'[') {
        return None;
    }
    let level = bytes[start + 1..]
        .iter()
        .take_while(|b| **b == b'=')
        .count();
    (bytes.get(start + 1 + level) == Some(&b'[')).then_some(level)
}

/// For a long bracket of `level` opening at `start`: (end of contents, index after the closing
/// bracket). Unterminated brackets run to the end of input.
fn long_bracket_end(bytes: &[u8], start: usize, level: usize) -> (usize, usize) {
    let mut i = start + level + 2;
    while i < bytes.len() {
        if bytes[i] == b']' {
            let equals = bytes[i + 1..].iter().take_while(|b| **b == b'=').count();
            if equals == level && bytes.get(i + 1 + level) == Some(&b']') {
                return (i, i + level + 2);
            }
        }
        i += 1;
    }
    (bytes.len(), bytes.len())
}

/// End of a numeral starting at `start`, following Lua 5.1's `read_numeral`.
fn numeral_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start;
    while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
        i += 1;
    }
    if i < bytes.len() && matches!(bytes[i], b'e' | b'E') {
        i += 1;
        if i < bytes.len() && matches!(bytes[i], b'+' | b'-') {
            i += 1;
        }
    }
    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
        i += 1;
    }
    i
}

const EVALUATE: Token<'static> = Token::Name("evaluate");
const FUNCTION: Token<'static> = Token::Name("function");
const LOCAL: Token<'static> = Token::Name("local");
const GLOBALS: Token<'static> = Token::Name("_G");

/// Recognises `function evaluate(`, `evaluate = function` and `_G.evaluate = function` /
/// `_G["evaluate"] = function`, but not their `local` forms (invisible to Sveltos).
fn defines_global_evaluate(tokens: &[Token<'_>]) -> bool {
    (0..tokens.len()).any(|i| {
        let at = |offset: usize| tokens.get(i + offset).copied();
        let before = |back: usize| i.checked_sub(back).map(|j| tokens[j]);
        let function_statement = at(0) == Some(FUNCTION)
            && at(1) == Some(EVALUATE)
            && at(2) == Some(Token::Symbol("("))
            && before(1) != Some(LOCAL);
        let assigned = at(0) == Some(EVALUATE)
            && at(1) == Some(Token::Symbol("="))
            && at(2) == Some(FUNCTION)
            && match before(1) {
                Some(LOCAL) => false,
                Some(Token::Symbol(".")) => before(2) == Some(GLOBALS),
                _ => true,
            };
        let indexed_global = at(0) == Some(GLOBALS)
            && at(1) == Some(Token::Symbol("["))
            && at(2) == Some(Token::Str("evaluate"))
            && at(3) == Some(Token::Symbol("]"))
            && at(4) == Some(Token::Symbol("="))
            && at(5) == Some(FUNCTION);
        function_statement || assigned || indexed_global
    })
}

/// `healthy` as an identifier (`hs.healthy`, `{healthy = …}`) or as the index `["healthy"]`.
fn mentions_healthy(tokens: &[Token<'_>]) -> bool {
    tokens.iter().enumerate().any(|(i, token)| {
        *token == Token::Name("healthy")
            || (*token == Token::Str("healthy")
                && i > 0
                && tokens[i - 1] == Token::Symbol("[")
                && tokens.get(i + 1) == Some(&Token::Symbol("]")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `validateHealths[0].script` of seed 04 (cert-manager rollout).
    const SEED04_DEPLOYMENT_HEALTH: &str = r#"function evaluate()
  local hs = {healthy = false, message = "available replicas not matching requested replicas"}
  if obj.status and obj.status.availableReplicas ~= nil and obj.status.availableReplicas == obj.spec.replicas then
    hs.healthy = true
  end
  return hs
end
"#;

    /// `stages[0].trigger.auto.postDelayHealthChecks[0].script` of seed 04: sets `hs.status`,
    /// never `healthy`.
    const SEED04_POST_DELAY: &str = r#"function evaluate()
  hs = {}
  hs.status = "Degraded"
  hs.message = "Missing Secret or ClusterIssuer not ready"
  local secret = getResource("v1", "Secret", "cert-manager", "cloudflare-api-token")
  local issuerReady = false
  if obj.status and obj.status.conditions then
    for _, cond in ipairs(obj.status.conditions) do
      if cond.type == "Ready" and cond.status == "True" then
        issuerReady = true
        break
      end
    end
  end
  if secret and issuerReady then
    hs.status = "Healthy"
    hs.message = "ClusterIssuer and Secret are ready"
  end
  return hs
end
"#;

    fn error_of(script: &str) -> LuaError {
        match check_lua_script(script).error {
            Some(error) => error,
            None => panic!("expected a syntax error for {script:?}"),
        }
    }

    #[test]
    fn seed04_deployment_health_is_valid_and_sets_healthy() {
        assert_eq!(
            check_lua_script(SEED04_DEPLOYMENT_HEALTH),
            LuaCheck {
                error: None,
                defines_evaluate: true,
                sets_healthy: true
            }
        );
    }

    #[test]
    fn seed04_post_delay_script_compiles_but_never_sets_healthy() {
        assert_eq!(
            check_lua_script(SEED04_POST_DELAY),
            LuaCheck {
                error: None,
                defines_evaluate: true,
                sets_healthy: false
            }
        );
    }

    #[test]
    fn missing_end_is_reported_on_the_last_line() {
        let with_newline = error_of("function evaluate()\n  return {healthy = true}\n");
        assert_eq!(with_newline.line, 2);
        assert!(
            with_newline.message.contains("'end' expected"),
            "{with_newline:?}"
        );
        assert!(with_newline.message.contains("<eof>"), "{with_newline:?}");

        let without_newline = error_of("function evaluate()\n  x = 1\n  return {healthy = true}");
        assert_eq!(without_newline.line, 3);
    }

    #[test]
    fn error_line_and_clean_message() {
        let error = error_of("function evaluate()\n  local = 3\n  return {}\nend\n");
        assert_eq!(error.line, 2);
        assert!(!error.message.contains("[string"), "{error:?}");
        assert!(!error.message.starts_with(' '), "{error:?}");
        assert!(error.message.contains("near '='"), "{error:?}");
    }

    #[test]
    fn lua52_and_later_syntax_is_rejected() {
        let goto = error_of("for i = 1, 3 do\n  goto continue\nend\n");
        assert_eq!(goto.line, 2, "{goto:?}");
        let label = error_of("local x = 1\n::continue::\n");
        assert_eq!(label.line, 2, "{label:?}");
        let floor_division = error_of("local x = 1\nlocal y = 7 // 2\n");
        assert_eq!(floor_division.line, 2, "{floor_division:?}");
        let bitwise = error_of("local x = 1 & 2\n");
        assert_eq!(bitwise.line, 1, "{bitwise:?}");
    }

    #[test]
    fn lua51_only_features_compile() {
        // `goto` is an ordinary name in 5.1.
        let check = check_lua_script(
            "local goto = 1\nfunction evaluate() return {healthy = goto == 1} end",
        );
        assert_eq!(check.error, None);
        assert!(check.defines_evaluate);
    }

    #[test]
    fn endless_script_compiles_without_running() {
        // Executing either chunk would never return (or raise); compiling must do neither.
        let top_level_loop = check_lua_script("while true do end\n");
        assert_eq!(top_level_loop.error, None);
        let raising =
            check_lua_script("error('executed')\nfunction evaluate() while true do end end\n");
        assert_eq!(raising.error, None);
        assert!(raising.defines_evaluate);
    }

    #[test]
    fn bytecode_is_refused() {
        let error = error_of("\x1bLua\x51\x00 not really bytecode");
        assert_eq!(error.line, 0);
        assert!(error.message.contains("binary"), "{error:?}");
    }

    #[test]
    fn healthy_in_comments_or_strings_does_not_count() {
        let hidden = [
            "-- hs.healthy = true\nreturn 1",
            "--[[ hs.healthy = true ]] return 1",
            "--[==[ ]] still a comment: healthy ]==] return 1",
            "local m = 'healthy'",
            "local m = \"not \\\" healthy\"",
            "local m = [[healthy]]",
            "local m = [=[ ]] healthy ]=]",
            "local unhealthy = healthy_count",
        ];
        for script in hidden {
            let check = check_lua_script(script);
            assert_eq!(check.error, None, "{script}");
            assert!(!check.sets_healthy, "{script}");
        }
    }

    #[test]
    fn healthy_in_code_counts() {
        let visible = [
            "local hs = {}\nhs.healthy = true",
            "return {healthy = true} -- done",
            "local m = 'x' hs = {} hs[\"healthy\"] = true",
            "local m = [[ ]] .. 'x'; healthy = 1e5",
        ];
        for script in visible {
            let check = check_lua_script(script);
            assert_eq!(check.error, None, "{script}");
            assert!(check.sets_healthy, "{script}");
        }
    }

    #[test]
    fn evaluate_definitions() {
        let global = [
            "function evaluate() return {} end",
            "evaluate = function() return {} end",
            "_G.evaluate = function() return {} end",
            "_G[\"evaluate\"] = function() return {} end",
        ];
        for script in global {
            let check = check_lua_script(script);
            assert_eq!(check.error, None, "{script}");
            assert!(check.defines_evaluate, "{script}");
        }
        let not_global = [
            "",
            "local function evaluate() return {} end",
            "local evaluate = function() return {} end",
            "function evaluate_all() return {} end",
            "function hs.evaluate() return {} end",
            "-- function evaluate() end",
            "local s = 'function evaluate() end'",
            "--[[\nfunction evaluate() end\n]]",
        ];
        for script in not_global {
            let check = check_lua_script(script);
            assert!(!check.defines_evaluate, "{script}");
        }
    }

    #[test]
    fn tokenizer_keeps_numbers_symbols_and_strings_apart() {
        assert_eq!(
            tokenize("x=0x1F..'a\\'b'~=[==[c]==]"),
            vec![
                Token::Name("x"),
                Token::Symbol("="),
                Token::Number,
                Token::Symbol(".."),
                Token::Str("a\\'b"),
                Token::Symbol("~="),
                Token::Str("c"),
            ]
        );
        // Unterminated constructs end the input instead of panicking.
        assert_eq!(tokenize("'abc"), vec![Token::Str("abc")]);
        assert_eq!(tokenize("[[abc"), vec![Token::Str("abc")]);
        assert_eq!(tokenize("'ab\\"), vec![Token::Str("ab\\")]);
        assert_eq!(tokenize("é"), vec![Token::Other, Token::Other]);
    }

    #[test]
    fn deep_nesting_is_a_syntax_error_not_a_stack_overflow() {
        let script = format!("x = {}1{}\n", "(".repeat(10_000), ")".repeat(10_000));
        let error = error_of(&script);
        assert_eq!(error.line, 1);
        assert!(
            error.message.contains("too many syntax levels"),
            "{error:?}"
        );
    }

    #[test]
    fn arbitrary_input_never_panics() {
        // A fixed-seed generator over Lua's lexical pieces: reproducible, no extra dependency.
        const PIECES: &[&str] = &[
            "function", "evaluate", "healthy", "local", "end", "_G", "=", "==", "(", ")", "[", "]",
            "[[", "]]", "[=[", "]=]", "--", "--[[", "--[==[", "'", "\"", "\\", ".", "..", "...",
            "1", "0x", "e-", " ", "\n", "\r", "é", "\u{0}", "\x1b", "~", "#", ":",
        ];
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = |bound: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            usize::try_from(state >> 33).unwrap_or(0) % bound
        };
        for _ in 0..2_000 {
            let length = next(32);
            let script: String = (0..length).map(|_| PIECES[next(PIECES.len())]).collect();
            let check = check_lua_script(&script);
            if let Some(error) = check.error {
                let last_line = u32::try_from(script.lines().count().max(1)).unwrap_or(u32::MAX);
                assert!(error.line <= last_line, "{script:?}: {error:?}");
                assert!(!error.message.is_empty(), "{script:?}");
            }
        }
    }

    #[test]
    fn usable_from_any_thread() {
        let handles: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| check_lua_script(SEED04_DEPLOYMENT_HEALTH)))
            .collect();
        for handle in handles {
            let check = handle.join().expect("thread panicked");
            assert!(check.error.is_none() && check.defines_evaluate && check.sets_healthy);
        }
    }
}
