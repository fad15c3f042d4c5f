    def test_a_job_is_done_once(self):
        self.burrow("build")

        def send(text):
            payload = '{"text": "%s"}' % text
            return self.burrow("send", "--local", ACTOR, "test", "job", payload, "--wait")

        # `--wait` returns once the job's processing committed, with its result.
        self.assertEqual(send("hello"), "HELLO")
        self.assertEqual(send("again"), "AGAIN")
        self.assertEqual(self.burrow("call", "--local", ACTOR, "test", "processed"), "2")


if __name__ == "__main__":
    unittest.main()
