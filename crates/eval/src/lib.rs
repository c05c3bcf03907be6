//! compactbench-eval: scenarios, the seeded session generator, the replay driver with fact
//! probes, and the matrix runner.
//!
//! Pure computation: it reads scenario files when asked ([`scenario::load_dir`]) and writes
//! nothing; reports are the report crate's job.

pub mod drive;
pub mod facts;
pub mod generate;
pub mod judge;
pub mod matrix;
mod offload_paths;
pub mod replay;
pub mod results;
pub mod revalidate;
pub mod scenario;
pub mod session;
pub mod shape;
pub mod variant;

#[cfg(test)]
mod shape_tests;
#[cfg(test)]
mod instructions_tests;
#[cfg(test)]
mod stale_tests;
#[cfg(test)]
mod tests;
