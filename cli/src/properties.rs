//! `--command-config FILE`: a Java properties file of client settings, as Kafka's own tools
//! take it, so that an operator's existing `client.properties` works unchanged.

use crate::{Failure, USAGE};
use kafka_group::{ClientBuilder, Error};
use std::path::Path;

/// Reads `path` and applies its client settings to `builder`.
pub fn apply(builder: ClientBuilder, path: &Path) -> Result<ClientBuilder, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::new(USAGE, format!("--command-config {}: {e}", path.display())))?;
    let mut builder = builder;
    for (line, key, value) in parse(&text) {
        // The library takes the client's settings and skips the consumer's and producer's a
        // shared file holds; a name no Kafka client of this crate knows is reported and
        // skipped, as Kafka's tools do, and a bad value of a known one is a usage error.
        match builder.property(&key, &value) {
            Ok(_) => {}
            Err(e @ Error::UnknownProperty { .. }) => {
                log::warn!("--command-config {}:{line}: {e}; ignored", path.display())
            }
            Err(e) => {
                return Err(Failure::new(
                    USAGE,
                    format!("--command-config {}:{line}: {e}", path.display()),
                ))
            }
        }
    }
    Ok(builder)
}

/// The `(line number, key, value)` entries of a Java properties file: `key=value`,
/// `key: value` or `key value`; `#` and `!` comment lines; a trailing backslash continues the
/// line; `\t`, `\n`, `\uXXXX` and escaped separators in keys and values.
pub fn parse(text: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let mut logical = line.trim_start().to_string();
        if logical.is_empty() || logical.starts_with('#') || logical.starts_with('!') {
            continue;
        }
        while ends_with_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let (key, value) = split(&logical);
        out.push((i + 1, unescape(key), unescape(value)));
    }
    out
}

/// An odd number of trailing backslashes continues the line.
fn ends_with_continuation(s: &str) -> bool {
    s.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// Splits at the first unescaped `=`, `:` or white space (white space around it is dropped).
fn split(line: &str) -> (&str, &str) {
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' | ' ' | '\t' => {
                let key = &line[..i];
                let mut rest = line[i..].trim_start();
                if !matches!(c, '=' | ':') {
                    if let Some(r) = rest.strip_prefix(['=', ':']) {
                        rest = r.trim_start();
                    }
                } else {
                    rest = rest[1..].trim_start();
                }
                return (key, rest);
            }
            _ => {}
        }
    }
    (line, "")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_properties_syntax() {
        let text = "# comment\n! also a comment\n\nbootstrap.servers=h1:9093,h2:9093\n\
                    security.protocol : SASL_SSL\nssl.ca.location /etc/ca.pem\n\
                    sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \\\n    \
                    required username=\"u\" password=\"p=1\";\nempty=\nkey\\=with\\:seps=v\\u0041\n";
        let got = parse(text);
        let kv: Vec<(&str, &str)> = got.iter().map(|(_, k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            kv,
            [
                ("bootstrap.servers", "h1:9093,h2:9093"),
                ("security.protocol", "SASL_SSL"),
                ("ssl.ca.location", "/etc/ca.pem"),
                (
                    "sasl.jaas.config",
                    "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p=1\";"
                ),
                ("empty", ""),
                ("key=with:seps", "vA"),
            ]
        );
        assert_eq!(got[0].0, 4, "line numbers count from 1");
    }
}
