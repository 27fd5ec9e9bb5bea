"""The training pipeline end to end, at toy size (ctest: train-pipeline).

    /usr/bin/python3 tools/train/test_pipeline.py      # EDITSPEC_BIN=<editspec> to test another build

Runs `run.py --preset test` twice, into two folders, on a small corpus (40 files of the standard
library) and checks what the full run relies on but cannot show at its size:
  - every stage runs and the card is written; the GGUFs load in `editspec complete` and `editspec edit`,
    which warns when a prompt goes past the model's training context;
  - the pipeline is deterministic: the two runs give byte-identical data, tokens and GGUFs;
  - a re-run with another draft trains the fine-tunes again from it (not resuming the old ones);
  - llama.cpp computes on an exported checkpoint what torch computes (check_export.py);
  - the edit examples' token kinds follow the line diff, and EfficientEdit's eq. 8 loss is the
    cross-entropy of the new lines' tokens alone.
What the models learn at this size means nothing; the full preset's card reports that.
"""
from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import corpus  # noqa: E402
import data  # noqa: E402
import edits  # noqa: E402
import run  # noqa: E402
from model import loss_weighted  # noqa: E402
from train import weights_of  # noqa: E402

N_FILES = 40


def editspec_bin() -> str:
    return run.editspec_bin()


def read_json(path):
    with open(path) as f:
        return json.load(f)


class pipeline_test(unittest.TestCase):
    tmp = ""
    gguf_py = ""
    runs: list[str] = []

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="editspec-train-test-")
        src = corpus.corpus_root_default()
        root = os.path.join(cls.tmp, "corpus")
        os.makedirs(root)
        for f in sorted(f for f in os.listdir(src) if f.endswith(".py"))[:N_FILES]:
            shutil.copyfile(os.path.join(src, f), os.path.join(root, f))
        cls.gguf_py = os.path.join(os.path.dirname(run.llama_prefix()), "src", "gguf-py")
        if cls.gguf_py not in sys.path:   # for the tests that read GGUFs themselves
            sys.path.insert(0, cls.gguf_py)
        cls.runs = []
        for name in ("a", "b"):
            out = os.path.join(cls.tmp, name)
            r = subprocess.run([sys.executable, os.path.join(HERE, "run.py"), "--preset", "test", "--seed", "1",
                                "--out", out, "--corpus-root", root, "--jobs", "1"], capture_output=True, text=True)
            if r.returncode != 0:
                cls.tearDownClass()
                raise RuntimeError(f"run.py --preset test failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
            cls.runs.append(out)

    @classmethod
    def tearDownClass(cls):
        if cls.tmp and not os.environ.get("EDITSPEC_KEEP_TEST"):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_stages_and_card(self):
        out = self.runs[0]
        for s in ("build", "corpus", "edits", "tokenizer", "tokenize", "applies", "fim-data", "target", "draft", "target-apply",
                  "target-fim", "labels", "draft-plain", "draft-edit", "eval", "apply-eval", "fim-eval"):
            self.assertTrue(os.path.exists(os.path.join(out, f"stage-{s}.json")), s)
        with open(os.path.join(out, "MODEL_CARD.md")) as f:
            card = f.read()
        self.assertIn("draft-edit", card)
        ev = read_json(os.path.join(out, "eval", "summary.json"))
        self.assertEqual(set(ev["code_acc"]), {"target", "draft", "draft-plain", "draft-edit"})
        self.assertTrue(ev["models"]["target"].endswith("target-fim/model.gguf"))   # the shipped target is evaluated
        self.assertTrue(ev["models"]["draft-plain"].endswith("draft-plain/model-fim.gguf"))   # with drafts of its vocabulary
        fe = read_json(os.path.join(out, "eval", "fim.json"))
        self.assertEqual(set(fe["variants"]), {"infill_suffix", "infill_no_suffix", "completion_prefix"})
        self.assertEqual(fe["positions"], run.PRESETS["test"]["fim"]["eval_lines"])
        ap = read_json(os.path.join(out, "eval", "apply.json"))
        self.assertGreater(ap["heldout"]["items_fit"], 0)
        for m in ("reuse", "reuse+lookup-longest"):
            self.assertTrue(ap["heldout"]["methods"][m]["identical_to_ar"], m)   # lossless

    def test_apply_tasks(self):
        # the snippet shows every changed line of the merged code, and elides only unchanged lines
        rows = data.read_jsonl(os.path.join(self.runs[0], "apply-data", "applies-train.jsonl"))
        tasks = [r for r in rows if "update" in r]
        self.assertGreater(len(tasks), 10)
        import applies
        for r in tasks:
            self.assertNotEqual(r["before"], r["after"])
            new = set(edits.lines_new(r["before"], r["after"]))
            after = r["after"].splitlines(keepends=True)
            up = set(r["update"].splitlines(keepends=True))
            for i in new:
                self.assertIn(after[i], up, r["id"])
            for ln in r["update"].splitlines(keepends=True):
                self.assertTrue(ln in after or ln.strip() in [m.strip() for m in applies.MARKERS], (r["id"], ln))
        # the prompt is editspec's apply template (include/editspec/apply.h), byte for byte
        self.assertEqual(data.apply_prompt_render("", "U", "C"),
                         "### Instruction:\nApply the update to the code.\n### Update:\nU\n### Original code:\nC\n### Edited code:\n")
        # the prompt's views of the file (issue 59): the cases of tests/request/test-apply-constraint.cpp
        # (apply_view), byte for byte
        self.assertEqual(data.apply_prompt_render("", "U", "C", view="none"),
                         "### Instruction:\nApply the update to the code.\n### Update:\nU\n### Edited code:\n")
        code = "".join(f"line_{i} = {i}\n" for i in range(20))
        update = "# ... existing code ...\nline_9 = 9  \nline_10 = 100\n# ... existing code ...\n"
        self.assertEqual(data.apply_windows(code, update, 2),
                         "... lines left out ...\nline_7 = 7\nline_8 = 8\nline_9 = 9\nline_10 = 10\nline_11 = 11\n"
                         "... lines left out ...\n")
        self.assertEqual(data.apply_windows("ab\n  xy = 1\nend", "  xy = 1\n", 5), "ab\n  xy = 1\nend\n")
        self.assertEqual(data.apply_windows(code, "x\n", 3), "... lines left out ...\n")

    def test_fim_examples(self):
        # [BOS] SUF suffix PRE prefix MID typed (prompt kinds) | middle (new) EOS; the FIM tokens appended
        # to the vocabulary, named in the GGUFs, and the drafts extended to the same vocabulary
        out = self.runs[0]
        fd = os.path.join(out, "fim-data")
        sp = data.vocab_special(os.path.join(fd, "tokenizer.gguf"))
        n0 = data.vocab_special(os.path.join(out, "data", "tokenizer.gguf"))["n_vocab"]
        self.assertEqual(sp["n_vocab"], n0 + 3)
        pre, suf, mid = n0, n0 + 1, n0 + 2
        z = np.load(os.path.join(fd, "fim-train.npz"))
        toks, kinds, offs = z["tokens"], z["kinds"], z["offsets"]
        self.assertGreater(len(offs) - 1, 10)
        for i in range(len(offs) - 1):
            t, k = toks[offs[i]:offs[i + 1]].tolist(), kinds[offs[i]:offs[i + 1]]
            self.assertEqual(t[:2], [sp["bos"], suf])   # suffix-prefix-middle
            self.assertEqual((t.count(pre), t.count(suf), t.count(mid)), (1, 1, 1))
            self.assertLess(t.index(pre), t.index(mid))
            self.assertEqual(t[-1], sp["eos"])
            self.assertEqual(k[-1], data.KIND_EOS)
            self.assertTrue((k[:t.index(mid) + 1] == data.KIND_PROMPT).all())
            body = k[t.index(mid) + 1:-1]
            self.assertTrue(np.isin(body, [data.KIND_PROMPT, data.KIND_NEW]).all())
            self.assertGreater(int((body == data.KIND_NEW).sum()), 0)
        # the training set is the FIM examples, then apply examples, then the pre-training's edits (no FIM tokens)
        zt = np.load(os.path.join(fd, "edits-train.npz"))
        pf = run.PRESETS["test"]["fim"]
        self.assertEqual(len(zt["offsets"]) - 1, len(offs) - 1 + pf["apply_mix"] + pf["edits_mix"])
        self.assertTrue((zt["tokens"][:offs[-1]] == toks).all())
        self.assertTrue((zt["tokens"][offs[-1]:] < n0).all())
        # drawn from all of apply-data's examples (its edits come last), not its first ones
        rows = data.read_jsonl(os.path.join(out, "apply-data", "applies-train.jsonl"))
        za = np.load(os.path.join(out, "apply-data", "edits-train.npz"))
        mixed = {bytes(zt["tokens"][a:b]) for a, b in zip(zt["offsets"][len(offs) - 1:-1], zt["offsets"][len(offs):])}
        edit_ex = [bytes(za["tokens"][za["offsets"][i]:za["offsets"][i + 1]]) for i, r in enumerate(za["rows"]) if "update" not in rows[r]]
        self.assertTrue(edit_ex and any(e in mixed for e in edit_ex))
        ze = np.load(os.path.join(out, "data", "edits-train.npz"))
        pre_ex = {tuple(ze["tokens"][a:b].tolist()) for a, b in zip(ze["offsets"][:-1], ze["offsets"][1:])}
        zo = zt["offsets"]
        last = [tuple(zt["tokens"][zo[i]:zo[i + 1]].tolist()) for i in range(len(zo) - 1 - pf["edits_mix"], len(zo) - 1)]
        self.assertTrue(all(e in pre_ex for e in last))
        import model as model_py
        gguf = model_py.gguf_import()
        for f in ("target-fim/model.gguf", "draft-plain/model-fim.gguf"):
            r = gguf.GGUFReader(os.path.join(out, f))
            self.assertEqual([int(r.fields[f"tokenizer.ggml.fim_{x}_token_id"].contents()) for x in ("pre", "suf", "mid")],
                             [pre, suf, mid], f)
            self.assertEqual(len(r.fields["tokenizer.ggml.tokens"].data), n0 + 3, f)
        r = gguf.GGUFReader(os.path.join(out, "target-fim", "model.gguf"))
        self.assertEqual(r.fields["editspec.fim_order"].contents(), "spm")   # editspec serve lays its prompts out so
        # the extended draft's new rows are zeros; its other rows are the draft's
        ra = {t.name: t for t in gguf.GGUFReader(os.path.join(out, "draft-plain", "model.gguf")).tensors}
        rb = {t.name: t for t in gguf.GGUFReader(os.path.join(out, "draft-plain", "model-fim.gguf")).tensors}
        ea, eb = np.asarray(ra["token_embd.weight"].data), np.asarray(rb["token_embd.weight"].data)
        self.assertTrue((eb[:n0] == ea).all())
        self.assertTrue((eb[n0:] == 0).all())
        # next-line tasks: the line between the prefix and the suffix
        for x in data.read_jsonl(os.path.join(fd, "nextline-heldout.jsonl")):
            self.assertTrue(x["prefix"].endswith("\n") and x["suffix"].startswith("\n") and x["line"].strip(), x)

    def test_take_target_apply_makes_the_same_fim_model(self):
        # target-fim starts from target-apply's export, its vocabulary grown: a run given that export makes
        # a byte-identical FIM model, training nothing else (--until target-fim)
        out = os.path.join(self.tmp, "f")
        r = subprocess.run([sys.executable, os.path.join(HERE, "run.py"), "--preset", "test", "--seed", "1", "--out", out,
                            "--corpus-root", os.path.join(self.tmp, "corpus"), "--jobs", "1", "--until", "target-fim",
                            "--take", "target-apply=" + os.path.join(self.runs[0], "target-apply", "model.gguf")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        self.assertIn("target-apply: taken from", r.stdout + r.stderr)
        for n in ("target", "draft"):
            self.assertFalse(os.path.exists(os.path.join(out, n, "model.gguf")), n)
        self.assertTrue(filecmp.cmp(os.path.join(out, "target-fim", "model.gguf"),
                                    os.path.join(self.runs[0], "target-fim", "model.gguf"), shallow=False))

    def test_pretrained_target_makes_the_same_model(self):
        # the apply fine-tuning starts from the target's export, so a run given that export instead of
        # pre-training makes a byte-identical apply model; a GGUF of another spec is refused
        out = os.path.join(self.tmp, "p")
        base = [sys.executable, os.path.join(HERE, "run.py"), "--preset", "test", "--seed", "1", "--out", out,
                "--corpus-root", os.path.join(self.tmp, "corpus"), "--jobs", "1", "--until", "train"]
        r = subprocess.run(base + ["--pretrained-target", os.path.join(self.runs[0], "draft", "model.gguf")],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not this preset's target", r.stdout + r.stderr)
        r = subprocess.run(base + ["--pretrained-target", os.path.join(self.runs[0], "target", "model.gguf")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        self.assertIn("taken from", r.stdout + r.stderr)
        self.assertTrue(filecmp.cmp(os.path.join(out, "target-apply", "model.gguf"),
                                    os.path.join(self.runs[0], "target-apply", "model.gguf"), shallow=False))

    def test_models_run_in_editspec(self):
        out = self.runs[0]
        target = os.path.join(out, "target", "model.gguf")
        r = subprocess.run([editspec_bin(), "complete", "-m", target, "-p", "def add(a, b):\n", "-n", "8", "-t", "1"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("warning", r.stderr)
        # a prompt past the 512 tokens the model was trained on: a warning, and the request still runs
        r = subprocess.run([editspec_bin(), "complete", "-m", target, "-p", "x = 1\n" * 400, "-n", "2", "-t", "1"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("trained on contexts of 512 tokens", r.stderr)
        code = os.path.join(self.tmp, "f.py")
        with open(code, "w") as f:
            f.write("def add(a, b):\n    return a + b\n")
        for t, d in ((target, "model.gguf"), (os.path.join(out, "target-fim", "model.gguf"), "model-fim.gguf")):
            r = subprocess.run([editspec_bin(), "edit", "-m", t, "--draft-model", os.path.join(out, "draft-edit", d),
                                "--method", "efficientedit@16", "-f", code, "-i", "Rename `a` to `x`.", "-t", "1", "--json"],
                               capture_output=True, text=True)
            # a model of a few training steps may run on to the edit's -n: editspec then exits 1 and says
            # so in its JSON ("complete": false, no code; issue 69: never a truncated file)
            self.assertIn(r.returncode, (0, 1), r.stderr)
            res = json.loads(r.stdout)
            if r.returncode == 1:
                self.assertIs(res.get("complete"), False, r.stderr)
                self.assertNotIn("code", res)
            self.assertGreater(res["by_source"]["model"]["drafted"], 0)   # the draft model took part

    def test_deterministic(self):
        a, b = self.runs
        files = ["data/corpus.json", "data/edits-train.jsonl", "data/edits-heldout.jsonl", "data/tokenizer.gguf",
                 "data/edits-train.npz", "data/code-train.npy", "labels/edits-train.npz",
                 "target/model.gguf", "draft/model.gguf", "draft-plain/model.gguf", "draft-edit/model.gguf",
                 "apply-data/edits-train.npz", "apply-data/applies-heldout-bench.jsonl", "target-apply/model.gguf",
                 "fim-data/edits-train.npz", "fim-data/nextline-heldout.jsonl", "target-fim/model.gguf",
                 "draft-plain/model-fim.gguf"]
        for f in files:
            pa, pb = os.path.join(a, f), os.path.join(b, f)
            self.assertTrue(os.path.exists(pa), f)
            if f == "data/corpus.json":   # names the corpus root, the same in both
                self.assertEqual(read_json(pa), read_json(pb), f)
                continue
            self.assertTrue(filecmp.cmp(pa, pb, shallow=False), f"{f} differs between two runs of one seed")

    def test_changed_draft_restarts_its_finetunes(self):
        # a fine-tune's settings name its starting model by path only: when the draft changes, the stage
        # key changes and the old fine-tune's checkpoint must not be resumed
        out = os.path.join(self.tmp, "c")
        base = [sys.executable, os.path.join(HERE, "run.py"), "--preset", "test", "--seed", "1", "--out", out,
                "--corpus-root", os.path.join(self.tmp, "corpus"), "--jobs", "1", "--until", "finetune"]
        for extra in ([], ["--set", "draft.lr=0.001"]):
            r = subprocess.run(base + extra, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        self.assertIn("inputs changed, starting over", r.stdout)
        for m in ("draft", "draft-plain", "draft-edit"):
            self.assertFalse(filecmp.cmp(os.path.join(out, m, "model.gguf"), os.path.join(self.runs[0], m, "model.gguf"),
                                         shallow=False), m)
        self.assertTrue(filecmp.cmp(os.path.join(out, "target", "model.gguf"),
                                    os.path.join(self.runs[0], "target", "model.gguf"), shallow=False))

    def test_export_matches_torch(self):
        out = self.runs[0]
        dd = os.path.join(out, "data")
        r = subprocess.run([sys.executable, os.path.join(HERE, "check_export.py"), "--vocab", os.path.join(dd, "tokenizer.gguf"),
                            "--tokens", os.path.join(dd, "code-heldout.bin"), "--checkpoint",
                            os.path.join(out, "target", "ckpt.pt"),
                            "--eval", os.path.join(ROOT, "build", "train", "bin", "editspec-train-eval")],
                           capture_output=True, text=True, env=run.env_one_thread(self.gguf_py))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertEqual(res["argmax_agree"], 1.0)
        self.assertLess(res["rel_l2_max"], 1e-3)

    def test_edit_kinds_follow_the_line_diff(self):
        dd = os.path.join(self.runs[0], "data")
        rows = data.read_jsonl(os.path.join(dd, "edits-train.jsonl"))
        z = np.load(os.path.join(dd, "edits-train.npz"))
        kinds, offs, keep = z["kinds"], z["offsets"], z["rows"]
        self.assertGreater(len(keep), 50)
        for i, r in enumerate(keep):
            k = kinds[offs[i]:offs[i + 1]]
            e = rows[r]
            self.assertEqual(k[0], data.KIND_PROMPT)
            self.assertEqual(k[-1], data.KIND_EOS)
            ans = k[1:-1][k[1:-1] != data.KIND_PROMPT]
            # the prompt comes first, then the answer: SAME / NEW only
            n_prompt = int((k[1:-1] == data.KIND_PROMPT).sum())
            self.assertTrue((k[1:1 + n_prompt] == data.KIND_PROMPT).all())
            self.assertTrue(np.isin(ans, [data.KIND_SAME, data.KIND_NEW]).all())
            # tokens of new lines exactly when the diff has new lines
            self.assertEqual(bool((ans == data.KIND_NEW).any()), bool(edits.lines_new(e["before"], e["after"])), e["kind"])

    def test_eq8_loss_counts_only_new_lines(self):
        torch.manual_seed(0)
        kinds = np.array([[data.KIND_PROMPT, data.KIND_PROMPT, data.KIND_SAME, data.KIND_NEW, data.KIND_NEW,
                           data.KIND_SAME, data.KIND_EOS, data.KIND_PAD]], np.uint8)
        logits = torch.randn(1, 8, 11)
        targets = torch.randint(0, 11, (1, 8))
        edit = {k: v for k, v in run.WEIGHTS_EDIT.items()}
        loss, wsum = loss_weighted(logits, targets, weights_of(kinds, edit))
        ce = torch.nn.functional.cross_entropy(logits[0], targets[0], reduction="none")
        self.assertEqual(float(wsum), 2.0)
        self.assertAlmostEqual(float(loss), float(ce[3:5].mean()), places=5)
        loss_p, wsum_p = loss_weighted(logits, targets, weights_of(kinds, run.WEIGHTS_PLAIN))
        self.assertEqual(float(wsum_p), 5.0)   # the answer: same, new, eos
        self.assertAlmostEqual(float(loss_p), float(ce[2:7].mean()), places=5)


if __name__ == "__main__":
    unittest.main(verbosity=2)
