//! The actiongate domain: the catalog, identity (onboarding, agents, sessions), policy, intents and
//! their checks, the credit ledger's rules, and the intent runner.
//! Ports to the outside world are traits: [`store::Store`], [`mail::Mailer`], [`clock::Clock`].
//!
//! Invariant: this crate knows no HTTP, no SQL and no CLI. Every surface calls the capability
//! services through [`Gateway`] ([`identity`], [`venues`], [`intents`], [`delegations`], [`purchases`] (credits),
//! [`personhood`]) and renders what they answer; a rule lives here once.

pub mod acceptance;
pub mod approvals;
pub mod audit;
pub mod catalog;
pub mod chains;
pub mod clock;
pub mod crypto;
pub mod delegation_chain;
pub mod delegations;
pub mod error;
pub mod execution;
pub mod gateway;
pub mod gather;
pub mod health;
pub mod identity;
pub mod intents;
pub mod ledger;
pub mod legs;
pub mod limits;
pub mod locks;
pub mod mail;
pub mod metrics;
pub mod money;
pub mod orders;
pub mod params;
pub mod payments;
pub mod personhood;
pub mod prices;
pub mod pricing;
pub mod providers;
pub mod purchases;
pub mod runner;
pub mod settings;
pub mod states;
pub mod store;
pub mod venues;
pub mod webhooks;

pub use error::{Error, Result};
pub use gateway::{Gateway, PersonhoodPorts, Ports};
pub use identity::{AgentContext, OwnerContext};
pub use settings::{DefaultPolicy, Settings};

/// The core's modules import one another one way only: `gateway` over the services, each service over
/// the ones it needs (identity ← venues ← intents ← delegations; identity ← credits) and the ports,
/// the pure rules under them. A cycle (two modules that need each other) fails here, with its path.
#[cfg(test)]
mod module_graph {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// Every `crate::<module>` a file names outside comments.
    fn imports(text: &str) -> BTreeSet<String> {
        let mut found = BTreeSet::new();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            let mut rest = code;
            while let Some(at) = rest.find("crate::") {
                rest = &rest[at + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.insert(name);
                }
            }
        }
        found
    }

    fn collect(dir: &Path, module: Option<&str>, graph: &mut BTreeMap<String, BTreeSet<String>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("")
                .to_owned();
            let owner = module.map_or(name.clone(), str::to_owned);
            if path.is_dir() {
                collect(&path, Some(&owner), graph);
            } else if path.extension().is_some_and(|e| e == "rs") && owner != "lib" {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let deps = graph.entry(owner.clone()).or_default();
                deps.extend(imports(&text).into_iter().filter(|d| *d != owner));
            }
        }
    }

    #[test]
    fn no_two_modules_need_each_other() {
        let mut graph = BTreeMap::new();
        collect(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            None,
            &mut graph,
        );
        assert!(graph.len() > 20, "the scan found the modules: {graph:?}");
        // Depth-first search for a back edge.
        fn visit(
            m: &str,
            graph: &BTreeMap<String, BTreeSet<String>>,
            path: &mut Vec<String>,
            done: &mut BTreeSet<String>,
        ) -> Option<Vec<String>> {
            if let Some(at) = path.iter().position(|p| p == m) {
                let mut cycle = path[at..].to_vec();
                cycle.push(m.to_owned());
                return Some(cycle);
            }
            if done.contains(m) {
                return None;
            }
            path.push(m.to_owned());
            for dep in graph.get(m).into_iter().flatten() {
                if let Some(cycle) = visit(dep, graph, path, done) {
                    return Some(cycle);
                }
            }
            path.pop();
            done.insert(m.to_owned());
            None
        }
        let mut done = BTreeSet::new();
        for m in graph.keys() {
            let cycle = visit(m, &graph, &mut Vec::new(), &mut done);
            assert_eq!(cycle, None, "modules that import each other");
        }
    }
}
