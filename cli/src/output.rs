//! Output helpers: aligned tables for people, a minimal JSON value for scripts.
//!
//! The JSON written here is a handful of objects, arrays, strings and integers; a tiny writer
//! keeps the crate free of a serde dependency for that.

use kafka_group::TopicPartition;
use std::fmt::{self, Write as _};
use std::io::Write as _;

/// Writes to standard output. A closed pipe (`kafka-group … | head`) ends the process quietly
/// with success, as it does for other command-line tools, instead of panicking as `print!`
/// does.
pub fn write_stdout(args: fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("kafka-group: cannot write to standard output: {e}");
        std::process::exit(i32::from(crate::BROKER));
    }
}

/// `print!` that survives a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::write_stdout(format_args!($($arg)*)) };
}

/// `println!` that survives a closed pipe.
macro_rules! outln {
    () => { $crate::output::write_stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

/// A JSON value, built by the subcommands and written with `Display`.
#[derive(Debug, Clone)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    /// A string value.
    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    /// `null` for `None`.
    pub fn opt_str(s: Option<impl Into<String>>) -> Json {
        s.map_or(Json::Null, |s| Json::Str(s.into()))
    }

    /// `null` for `None`.
    pub fn opt_int(n: Option<i64>) -> Json {
        n.map_or(Json::Null, Json::Int)
    }

    /// `{"topic":…,"partition":…}`, as every subcommand writes a partition.
    pub fn topic_partition(tp: &TopicPartition) -> Json {
        Json::Obj(vec![
            ("topic", Json::str(&tp.topic)),
            ("partition", Json::Int(tp.partition.into())),
        ])
    }
}

fn write_str(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Int(n) => write!(f, "{n}"),
            Json::Str(s) => write_str(f, s),
            Json::Arr(items) => {
                f.write_char('[')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_char(']')
            }
            Json::Obj(fields) => {
                f.write_char('{')?;
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write_str(f, k)?;
                    write!(f, ":{v}")?;
                }
                f.write_char('}')
            }
        }
    }
}

/// A table printed with left-aligned columns separated by two spaces, like
/// `kafka-consumer-groups --describe`.
#[derive(Debug)]
pub struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: &[&'static str]) -> Table {
        Table {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (missing cells print empty).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if i < widths.len() {
                    widths[i] = widths[i].max(cell.chars().count());
                }
            }
        }
        let line = |f: &mut fmt::Formatter<'_>, cells: &mut dyn Iterator<Item = &str>| -> fmt::Result {
            let mut out = String::new();
            for (i, w) in widths.iter().enumerate() {
                let cell = cells.next().unwrap_or("");
                if i + 1 == widths.len() {
                    out.push_str(cell);
                } else {
                    let _ = write!(out, "{cell:<w$}  ");
                }
            }
            writeln!(f, "{}", out.trim_end())
        };
        line(f, &mut self.header.iter().copied())?;
        for row in &self.rows {
            line(f, &mut row.iter().map(String::as_str))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_strings() {
        let v = Json::Obj(vec![
            ("a", Json::str("q\"\\\n\u{1}")),
            ("b", Json::Arr(vec![Json::Int(-1), Json::Null, Json::Bool(true)])),
        ]);
        assert_eq!(v.to_string(), r#"{"a":"q\"\\\n\u0001","b":[-1,null,true]}"#);
    }

    #[test]
    fn tables_align_columns() {
        let mut t = Table::new(&["A", "LONGER"]);
        t.row(vec!["wide-cell".into(), "x".into()]);
        assert_eq!(t.to_string(), "A          LONGER\nwide-cell  x\n");
    }
}
