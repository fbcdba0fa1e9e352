import assert from 'node:assert/strict';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ModelLoadError } from './model-load-error.ts';
import { MANIFEST_FILE, readModelDir } from './model-manifest.ts';
import { copyModelDir, generatedModelDir, tempDir } from '../../worker/src/runtime/test-models.ts';

async function readManifest(dir: string): Promise<Record<string, any>> {
  return JSON.parse(await readFile(join(dir, MANIFEST_FILE), 'utf8')) as Record<string, any>;
}

async function loadError(dir: string): Promise<ModelLoadError> {
  try {
    await readModelDir(dir);
  } catch (err) {
    assert.ok(err instanceof ModelLoadError, `expected ModelLoadError, got ${String(err)}`);
    return err;
  }
  assert.fail('readModelDir resolved');
}

describe('readModelDir', () => {
  let tiny: string;
  before(async () => {
    tiny = await generatedModelDir('tiny');
  });

  it('reads the generated tiny model into a frozen spec with absolute, existing paths', async () => {
    const spec = await readModelDir(tiny);
    assert.equal(spec.id, 'shoal-tiny-embed');
    assert.equal(spec.task, 'embed');
    assert.equal(spec.dimensions, 64);
    assert.equal(spec.maxSequenceLength, 128);
    assert.equal(spec.pooling, 'mean');
    assert.equal(spec.normalize, true);
    assert.equal(spec.modelPath, join(tiny, 'model.onnx'));
    assert.equal(spec.tokenizerPath, join(tiny, 'tokenizer.json'));
    assert.equal(spec.outputName, 'last_hidden_state');
    assert.deepEqual(spec.inputNames, { inputIds: 'input_ids', attentionMask: 'attention_mask', tokenTypeIds: 'token_type_ids' });
    assert.ok(typeof spec.memoryBytes === 'number' && spec.memoryBytes > 0);
    assert.ok(Object.isFrozen(spec) && Object.isFrozen(spec.inputNames) && Object.isFrozen(spec.source));
    assert.throws(() => {
      (spec as { dimensions: number }).dimensions = 1;
    }, TypeError);
  });

  describe('on a broken copy', () => {
    let dir: string;
    let dispose: () => Promise<void>;
    before(async () => {
      ({ dir, dispose } = await copyModelDir(tiny));
    });
    after(() => dispose());

    it('reports every manifest problem at once, each naming its field, with the path', async () => {
      await writeFile(join(dir, MANIFEST_FILE), JSON.stringify({
        formatVersion: 2,
        task: 'classify',
        dimensions: -1,
        maxSequenceLength: 1.5,
        pooling: 'max',
        normalize: 'yes',
        onnx: { file: 'model.onnx', output: '', inputs: { inputIds: 'input_ids' } },
        tokenizer: '../../etc/passwd',
        memoryBytes: 0,
        source: 'generated',
      }));
      const err = await loadError(dir);
      const fields = err.problems.map((p) => p.slice(0, p.indexOf(':')));
      assert.deepEqual(fields, [
        'formatVersion', 'id', 'task', 'dimensions', 'maxSequenceLength', 'pooling', 'normalize',
        'onnx.output', 'onnx.inputs.attentionMask', 'tokenizer', 'memoryBytes', 'source',
      ]);
      assert.equal(err.path, dir);
      assert.ok(err.message.startsWith(`cannot load model at ${dir}:`), err.message);
      for (const p of err.problems) assert.ok(err.message.includes(p), `message lists "${p}"`);
      assert.match(err.problems.join('\n'), /dimensions: must be an integer >= 1 \(got -1\)/);
      assert.match(err.problems.join('\n'), /tokenizer: must name a file inside the model directory/);
    });

    it('reports missing files named by a valid manifest, both at once', async () => {
      const manifest = await readManifest(tiny);
      manifest.onnx.file = 'absent.onnx';
      manifest.tokenizer = 'absent-tokenizer.json';
      await writeFile(join(dir, MANIFEST_FILE), JSON.stringify(manifest));
      const err = await loadError(dir);
      assert.deepEqual(err.problems, [
        `onnx.file: ${join(dir, 'absent.onnx')} does not exist`,
        `tokenizer: ${join(dir, 'absent-tokenizer.json')} does not exist`,
      ]);
    });

    it('accepts a model without token types (tokenTypeIds omitted)', async () => {
      const manifest = await readManifest(tiny);
      delete manifest.onnx.inputs.tokenTypeIds;
      await writeFile(join(dir, MANIFEST_FILE), JSON.stringify(manifest));
      const spec = await readModelDir(dir);
      assert.equal(spec.inputNames.tokenTypeIds, undefined);
    });

    it('reports invalid JSON and a non-object manifest', async () => {
      await writeFile(join(dir, MANIFEST_FILE), '{ "formatVersion": 1,');
      assert.match((await loadError(dir)).message, /shoal-model\.json: is not valid JSON/);
      await writeFile(join(dir, MANIFEST_FILE), '[1, 2]');
      assert.match((await loadError(dir)).problems[0]!, /^manifest: must be a JSON object/);
    });

    it('reports a missing manifest with the directory path', async () => {
      await rm(join(dir, MANIFEST_FILE));
      const err = await loadError(dir);
      assert.deepEqual(err.problems, ['shoal-model.json: cannot be read (ENOENT)']);
      assert.ok(err.message.includes(dir));
    });
  });

  it('reports a directory that does not exist', async () => {
    const { dir, dispose } = await tempDir();
    await dispose();
    const err = await loadError(dir);
    assert.equal(err.path, dir);
  });
});
