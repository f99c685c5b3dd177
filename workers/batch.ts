/**
 * `parse --batch`'s helper thread (src/commands/parse.ts): units of lines in
 * (src/core/batch.ts's BatchUnit, their buffer transferred), their answer
 * lines out on the port workerData gives, one unit at a time and in the order
 * given (a first message, null, says it is ready). The vocabulary table
 * arrives on SharedArrayBuffers via workerData with the batch's options, so
 * the thread reads and builds nothing before its first unit.
 */
import { parentPort, workerData, type MessagePort } from "node:worker_threads";
import { BatchCases, type BatchUnit } from "../src/core/batch.js";
import type { ParserOptions } from "../src/core/parser.js";
import { Vocabulary, type VocabTable } from "../src/core/vocab.js";

const data = workerData as { table: VocabTable; base: ParserOptions; defaultRole: string | null; answers: MessagePort };
const cases = new BatchCases(new Vocabulary(data.table), data.base, data.defaultRole);

// the answers on a port of their own, which the main thread reads when it has a unit to give
parentPort?.on("message", (u: BatchUnit) => data.answers.postMessage(cases.answerUnit(u)));
// ready: the main thread gives units from now on
data.answers.postMessage(null);
