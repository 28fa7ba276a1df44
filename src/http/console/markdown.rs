//! Summaries as the console shows them: Markdown rendered to HTML that cannot carry script (a
//! summary quotes whatever the session held, and the session is anyone's text), and the diff of
//! a summary against the one it replaced.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag};
use similar::{ChangeTag, TextDiff};

/// Markdown as HTML. Raw HTML in the text is shown as text; links and images keep only
/// `http`, `https`, `mailto` and relative targets.
pub(super) fn to_html(markdown: &str) -> String {
    let events = Parser::new_ext(
        markdown,
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH,
    )
    .map(|event| match event {
        Event::Html(html) | Event::InlineHtml(html) => Event::Text(html),
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Link {
            link_type,
            dest_url: safe_url(dest_url),
            title,
            id,
        }),
        Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Image {
            link_type,
            dest_url: safe_url(dest_url),
            title,
            id,
        }),
        other => other,
    });
    let mut html = String::with_capacity(markdown.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut html, events);
    html
}

fn safe_url(url: CowStr<'_>) -> CowStr<'_> {
    let lower = url.trim_start().to_ascii_lowercase();
    let scheme = lower
        .split_once(':')
        .map(|(scheme, _)| scheme)
        .filter(|scheme| !scheme.contains(['/', '?', '#']));
    match scheme {
        None | Some("http" | "https" | "mailto") => url,
        Some(_) => CowStr::Borrowed("#"),
    }
}

/// One line of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DiffLine {
    /// `added`, `removed` or `same`.
    pub change: &'static str,
    pub text: String,
}

/// How `new` differs from `old`, line by line.
pub(super) fn diff(old: &str, new: &str) -> Vec<DiffLine> {
    TextDiff::from_lines(old, new)
        .iter_all_changes()
        .map(|change| DiffLine {
            change: match change.tag() {
                ChangeTag::Insert => "added",
                ChangeTag::Delete => "removed",
                ChangeTag::Equal => "same",
            },
            text: change.value().trim_end_matches(['\n', '\r']).to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_renders_but_carries_no_script() {
        let html = to_html(
            "## Goal\n- fix `parse.rs`\n\n<script>alert(1)</script>\n\n\
             [x](javascript:alert(2)) [y](https://example.com/a) ![i](data:text/html,z) \
             <img src=x onerror=alert(3)>",
        );
        assert!(html.contains("<h2>Goal</h2>"), "{html}");
        assert!(html.contains("<code>parse.rs</code>"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img src=x"), "{html}");
        assert!(!html.contains("javascript:"), "{html}");
        assert!(!html.contains("data:text"), "{html}");
        assert!(html.contains(r#"href="https://example.com/a""#), "{html}");
    }

    #[test]
    fn the_diff_names_lines_added_and_removed() {
        let lines = diff("## Goal\nA\nB\n", "## Goal\nB\nC\n");
        let shown: Vec<(&str, &str)> = lines.iter().map(|l| (l.change, l.text.as_str())).collect();
        assert_eq!(
            shown,
            [
                ("same", "## Goal"),
                ("removed", "A"),
                ("same", "B"),
                ("added", "C")
            ]
        );
    }
}
