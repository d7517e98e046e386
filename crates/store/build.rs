// `sqlx::migrate!` embeds the migrations at compile time; without this a migration added to a
// folder would not rebuild the crate that embeds them.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
