#[test]
fn a_job_is_done_once() {
    let data = new_data_dir("queue");
    burrow(&data, &["build"]);
    let send = |text: &str| {
        let payload = format!(r#"{{"text": "{text}"}}"#);
        burrow(&data, &["send", "--local", ACTOR, "test", "job", &payload, "--wait"])
    };
    // `--wait` returns once the job's processing committed, with its result.
    assert_eq!(send("hello"), "HELLO");
    assert_eq!(send("again"), "AGAIN");
    assert_eq!(burrow(&data, &["call", "--local", ACTOR, "test", "processed"]), "2");
    std::fs::remove_dir_all(&data).unwrap();
}
