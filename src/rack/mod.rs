//! `rack_check`: the acceptance run of a rack. A TOML spec (`spec`) says how to
//! launch (`launch`), what doctor gets, which tests to run and the checks their
//! results must meet (`check`: absolute thresholds, or a percentage of a link
//! limit of `crate::limits`). The run (`cli`) starts doctor and each test as a
//! child process with a timeout (`runner`), several rounds of each test with a
//! threshold and more of those left inconclusive (`rounds`), reads back what each wrote
//! (`steps`: a step that did not finish with results never passes; after one that
//! hung, `probe` finds the node whose path drops full-size frames), judges the
//! CSVs (`evaluate`: PASS, FAIL or INCONCLUSIVE on each figure's interval), and writes one report directory with a Markdown summary
//! (`report`, its node text escaped by `markdown`) and a self-contained HTML page (`html`), both listing every node
//! and what failed on it (`nodes`). Exit 0 only when all passed, 4 when a check stayed inconclusive.

pub mod check;
pub mod check_result;
pub mod cli;
pub mod evaluate;
pub mod html;
pub mod launch;
pub mod markdown;
pub mod nodes;
pub mod probe;
pub mod report;
pub mod rounds;
pub mod runner;
pub mod spec;
pub mod steps;
