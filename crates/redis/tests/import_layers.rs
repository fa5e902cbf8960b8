//! The crate's files import only downwards: no file reaches itself
//! through the modules it names (`super::x`, `crate::x`), so the layers
//! of lib.rs's comment (arguments and tables, server-wide state,
//! `session`, the commands, `face`) stay layers. A new import that closes
//! a circle fails here with the circle named.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each file's module name → the crate modules its code (before its
/// tests) names.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&src).expect("read src") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).expect("read a source file");
            files.insert(name, text);
        }
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let mut graph = BTreeMap::new();
    for (name, text) in &files {
        let code = match text.find("#[cfg(test)]\nmod tests") {
            Some(i) => &text[..i],
            None => text,
        };
        let mut named = BTreeSet::new();
        for line in code.lines() {
            let line = line.trim_start();
            if line.starts_with("//") {
                continue;
            }
            for prefix in ["super::", "crate::"] {
                for (i, _) in line.match_indices(prefix) {
                    let rest = &line[i + prefix.len()..];
                    let end = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    let target = &rest[..end];
                    if target != name && target != "lib" && modules.contains(target) {
                        named.insert(target.to_string());
                    }
                }
            }
        }
        graph.insert(name.clone(), named);
    }
    graph
}

/// A circle through `from`, if any: the path back to it.
fn circle_through(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    let mut stack = vec![(from.to_string(), vec![from.to_string()])];
    let mut seen = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for next in graph.get(&at).into_iter().flatten() {
            if next == from {
                let mut circle = path.clone();
                circle.push(next.clone());
                return Some(circle);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push((next.clone(), longer));
            }
        }
    }
    None
}

#[test]
fn no_file_imports_itself_through_others() {
    let graph = imports();
    assert!(graph.len() > 50, "the crate's files were not found");
    assert!(
        graph["face"].contains("session") && graph["session"].contains("hub"),
        "the reader misses imports: {:?}",
        graph["face"]
    );
    let circles: Vec<String> = graph
        .keys()
        .filter_map(|m| circle_through(&graph, m))
        .map(|c| c.join(" -> "))
        .collect();
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}
