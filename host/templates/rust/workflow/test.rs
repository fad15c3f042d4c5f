#[test]
fn the_workflow_counts_to_its_steps_and_once_more() {
    let data = new_data_dir("workflow");
    burrow(&data, &["build"]);
    burrow(&data, &["create", "--local", ACTOR, "test", r#"{"steps": 3}"#]);
    // Each command's host runs the workflow while it lives; a later one
    // resumes it where it was.
    let mut count = String::new();
    for _ in 0..100 {
        count = burrow(&data, &["call", "--local", ACTOR, "test", "count"]);
        if count == "4" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(count, "4");
    std::fs::remove_dir_all(&data).unwrap();
}
