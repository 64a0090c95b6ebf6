//! The scheduler: runs the tasks that `tasks` keeps. `runner` sleeps until
//! the next due task, claims it, runs the agent, records the run and moves
//! the schedule on. It depends on `agents` and `tasks`; neither depends on it.

pub mod runner;

pub use runner::Runner;
