//! What a command produces: text for people, JSON for programs, and the failures that decide the
//! exit code.

use serde_json::Value;

use crate::error::AdminError;

pub struct Report {
    pub text: String,
    pub json: Value,
    /// Failures on some NameServers that did not stop the command (a write reaching only some).
    pub failures: Vec<AdminError>,
    pub exit_code: i32,
}

impl Report {
    pub fn ok(text: String, json: Value) -> Self {
        Report::partial(text, json, Vec::new())
    }

    /// A command's report; exit code 1 when some server failed.
    pub fn partial(text: String, json: Value, failures: Vec<AdminError>) -> Self {
        let exit_code = i32::from(!failures.is_empty());
        Report {
            text,
            json,
            failures,
            exit_code,
        }
    }
}

/// Left-aligned columns, two spaces apart, each as wide as its widest cell.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Table {
            rows: vec![header.iter().map(|h| format!("#{h}")).collect()],
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|cell| cell.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let last = row.len().saturating_sub(1);
            for (c, cell) in row.iter().enumerate() {
                out.push_str(cell);
                if c < last {
                    let pad = widths[c] - cell.chars().count() + 2;
                    out.push_str(&" ".repeat(pad));
                }
            }
            out.push('\n');
        }
        out
    }
}

/// Java's `PermName.perm2String` form next to the number: `6 (RW-)`.
pub fn perm(perm: i32) -> String {
    let flag = |bit: i32, c: char| if perm & bit != 0 { c } else { '-' };
    format!("{perm} ({}{}{})", flag(4, 'R'), flag(2, 'W'), flag(1, 'X'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_perm_reads_like_java() {
        let mut t = Table::new(&["Name", "Id"]);
        t.row(vec!["broker-a".into(), "0".into()]);
        assert_eq!(t.render(), "#Name     #Id\nbroker-a  0\n");
        assert_eq!(perm(6), "6 (RW-)");
        assert_eq!(perm(5), "5 (R-X)");
    }
}
