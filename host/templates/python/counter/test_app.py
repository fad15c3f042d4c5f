    def test_the_counter_counts(self):
        self.burrow("build")
        self.assertEqual(self.burrow("call", "--local", ACTOR, "test", "increment", "[2]"), "2")
        self.assertEqual(self.burrow("call", "--local", ACTOR, "test", "increment", "[3]"), "5")
        self.assertEqual(self.burrow("call", "--local", ACTOR, "test", "get"), "5")


if __name__ == "__main__":
    unittest.main()
