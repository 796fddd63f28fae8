//! What a run's measurements become: `figures`, the result arithmetic; `verdict`,
//! perftest's verifier limits (-w, -y); `header`, the perftest header's facts
//! (the table and CSV rows are written by `report::perftest` and `report::csv`).

pub mod figures;
pub mod header;
pub mod verdict;
