//! What `keylatch serve` sends: the page (whose first HTML already lists every holder and
//! waiter), the fragment its script fetches to refresh itself, and `/metrics` in Prometheus's
//! text format. One renderer for the page and its refreshes.

use std::fmt::Write;

use crate::view::{Snapshot, short_duration};

/// The page's refresh: fetch the fragment, swap it in. No build step, no framework.
const SCRIPT: &str = r#"<script>
(function () {
  var every = Number(document.body.dataset.every) || 1000;
  function refresh() {
    fetch('fragment', { cache: 'no-store' })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.text(); })
      .then(function (html) {
        document.getElementById('view').innerHTML = html;
        document.getElementById('status').textContent = 'live';
      })
      .catch(function () { document.getElementById('status').textContent = 'disconnected'; })
      .finally(function () { setTimeout(refresh, every); });
  }
  setTimeout(refresh, every);
})();
</script>"#;

const STYLE: &str = "<style>
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #111; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 0.25rem 0.6rem; border-bottom: 1px solid #ddd; vertical-align: top; }
th { background: #f3f3f3; }
tr.waiter td { color: #7a4b00; }
code { font-size: 0.9em; }
.muted { color: #666; }
</style>";

/// HTML-escapes `text`.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The whole page.
pub fn page(view: &Result<Snapshot, String>, every_ms: u128) -> String {
    let pattern = view.as_ref().map(|s| s.pattern.as_str()).unwrap_or("");
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>keylatch: locks matching {pattern}</title>{STYLE}</head>\n\
         <body data-every=\"{every_ms}\"><h1>keylatch: held locks</h1>\n\
         <p>Names matching <code>{pattern}</code>. Read-only. \
         <span id=\"status\" class=\"muted\" aria-live=\"polite\">as served</span></p>\n\
         <div id=\"view\">{}</div>\n{SCRIPT}</body></html>\n",
        fragment(view),
        pattern = esc(pattern),
    )
}

/// The table of locks, holders and waiters (the part the script refreshes).
pub fn fragment(view: &Result<Snapshot, String>) -> String {
    let snapshot = match view {
        Ok(snapshot) => snapshot,
        Err(err) => return format!("<p role=\"alert\">cannot read Redis: {}</p>", esc(err)),
    };
    let mut out = String::new();
    let waiters: usize = snapshot.locks.iter().map(|l| l.waiters.len()).sum();
    let _ = write!(
        out,
        "<p id=\"summary\">{} held, {} waiting in fair queues{}</p>",
        snapshot.locks.len(),
        waiters,
        if snapshot.truncated {
            " (the scan stopped early: narrow the pattern)"
        } else {
            ""
        }
    );
    if snapshot.locks.is_empty() {
        out.push_str("<p id=\"empty\">No lock is held.</p>");
        return out;
    }
    out.push_str(
        "<table><caption>Held locks, the longest wait first</caption><thead><tr>\
         <th scope=\"col\">lock</th><th scope=\"col\">lease left</th><th scope=\"col\">role</th>\
         <th scope=\"col\">owner</th><th scope=\"col\">host</th><th scope=\"col\">pid</th>\
         <th scope=\"col\">program</th><th scope=\"col\">for</th></tr></thead><tbody>",
    );
    for lock in &snapshot.locks {
        let name = esc(&lock.name);
        let ttl = lock.ttl_ms.map_or("no expiry".to_owned(), short_duration);
        for holder in &lock.holders {
            let held = if holder.held_exact {
                short_duration(holder.held_ms)
            } else {
                format!("≥ {}", short_duration(holder.held_ms))
            };
            let _ = write!(
                out,
                "<tr class=\"holder\" data-lock=\"{name}\" data-owner=\"{owner}\" \
                 data-host=\"{host}\" data-pid=\"{pid}\"><th scope=\"row\">{name}</th>\
                 <td>{ttl}</td><td>holds {holds}</td><td><code>{owner}</code></td>\
                 <td>{host}</td><td>{pid}</td><td>{program}</td><td>{held}</td></tr>",
                owner = esc(&holder.owner),
                holds = esc(&holder.holds),
                host = esc(holder.host.as_deref().unwrap_or("")),
                pid = holder.pid.map(|p| p.to_string()).unwrap_or_default(),
                program = esc(holder.program.as_deref().unwrap_or("")),
            );
        }
        for waiter in &lock.waiters {
            let _ = write!(
                out,
                "<tr class=\"waiter\" data-lock=\"{name}\" data-owner=\"{owner}\" \
                 data-position=\"{pos}\"><th scope=\"row\">{name}</th><td></td>\
                 <td>waits #{pos}</td><td><code>{owner}</code></td><td></td><td></td><td></td>\
                 <td>≥ {waited}</td></tr>",
                owner = esc(&waiter.owner),
                pos = waiter.position,
                waited = short_duration(waiter.waited_ms),
            );
        }
        if lock.subscribers > 0 {
            let _ = write!(
                out,
                "<tr class=\"subscribers\" data-lock=\"{name}\"><th scope=\"row\">{name}</th>\
                 <td></td><td colspan=\"6\">{} client(s) subscribed for its release</td></tr>",
                lock.subscribers
            );
        }
    }
    out.push_str("</tbody></table>");
    out
}

/// `/metrics`: Prometheus's text format.
pub fn metrics(view: &Result<Snapshot, String>) -> String {
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, value: f64| {
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
        );
    };
    let Ok(snapshot) = view else {
        gauge(
            "keylatch_view_up",
            "1 when the last read of Redis succeeded.",
            0.0,
        );
        return out;
    };
    let waiters: usize = snapshot.locks.iter().map(|l| l.waiters.len()).sum();
    let holders: usize = snapshot.locks.iter().map(|l| l.holders.len()).sum();
    let longest = snapshot.locks.iter().map(|l| l.longest_wait_ms).max();
    let longest_hold = snapshot
        .locks
        .iter()
        .flat_map(|l| l.holders.iter().map(|h| h.held_ms))
        .max();
    gauge(
        "keylatch_view_up",
        "1 when the last read of Redis succeeded.",
        1.0,
    );
    gauge(
        "keylatch_locks_held",
        "Held locks among the names matching the pattern.",
        snapshot.locks.len() as f64,
    );
    gauge(
        "keylatch_lock_holders",
        "Holders of those locks.",
        holders as f64,
    );
    gauge(
        "keylatch_lock_waiters",
        "Waiters in those locks' fair queues.",
        waiters as f64,
    );
    gauge(
        "keylatch_lock_longest_wait_seconds",
        "The longest wait in a fair queue, at least (since the view first saw it).",
        longest.unwrap_or(0) as f64 / 1000.0,
    );
    gauge(
        "keylatch_lock_longest_hold_seconds",
        "The longest hold.",
        longest_hold.unwrap_or(0) as f64 / 1000.0,
    );
    gauge(
        "keylatch_view_truncated",
        "1 when the scan stopped before it saw every key.",
        f64::from(u8::from(snapshot.truncated)),
    );
    out
}
