    def test_the_workflow_counts_to_its_steps_and_once_more(self):
        self.burrow("build")
        self.burrow("create", "--local", ACTOR, "test", '{"steps": 3}')
        # Each command's host runs the workflow while it lives; a later one
        # resumes it where it was.
        for _ in range(100):
            count = self.burrow("call", "--local", ACTOR, "test", "count")
            if count == "4":
                break
            time.sleep(0.1)
        self.assertEqual(count, "4")


if __name__ == "__main__":
    unittest.main()
