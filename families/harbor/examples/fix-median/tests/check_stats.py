import json
import sys

sys.path.insert(0, "/app")
CASES = [([3, 1, 2], 2), ([4, 1, 3, 2], 2.5), ([7], 7), ([5, 5, 1, 9], 5), ([10, -2, 4, 8, 6, 0], 5)]
passed = 0
try:
    from stats import median
    for values, want in CASES:
        try:
            passed += median(list(values)) == want
        except Exception:
            pass
except Exception as e:
    print("cannot import stats:", e)
with open("/logs/verifier/reward.json", "w") as f:
    json.dump({"reward": float(passed == len(CASES)), "share_passed": passed / len(CASES)}, f)
