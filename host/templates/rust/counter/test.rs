#[test]
fn the_counter_counts() {
    let data = new_data_dir("counter");
    burrow(&data, &["build"]);
    assert_eq!(burrow(&data, &["call", "--local", ACTOR, "test", "increment", "[2]"]), "2");
    assert_eq!(burrow(&data, &["call", "--local", ACTOR, "test", "increment", "[3]"]), "5");
    assert_eq!(burrow(&data, &["call", "--local", ACTOR, "test", "get"]), "5");
    std::fs::remove_dir_all(&data).unwrap();
}
