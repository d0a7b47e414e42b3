package io.lambdalake.delta;

import io.delta.storage.S3SingleDriverLogStore;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.util.Iterator;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Delta's log store for S3 whose commits exclude each other across drivers.
 *
 * <p>{@link S3SingleDriverLogStore} checks that commit file N does not exist and then writes
 * it, under a lock of its own JVM: two drivers committing N at once both pass the check and
 * the second PUT silently replaces the first commit. Here commit files are created with
 * hadoop-aws's conditional create, a PUT with {@code If-None-Match: *}: S3 (and S3-compatible
 * servers that honour it) refuses the second with 412, which becomes the
 * {@link FileAlreadyExistsException} Delta answers with its conflict check and a retry at
 * N+1. delta-rs commits the same way, so Spark drivers and delta-rs writers may share a
 * table. Files written with overwrite (checkpoints, {@code _last_checkpoint}) are written as
 * before.
 */
public class ConditionalPutS3LogStore extends S3SingleDriverLogStore {

  /** hadoop-aws's option for a create that fails if the object exists (If-None-Match). */
  static final String CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite";

  public ConditionalPutS3LogStore(Configuration hadoopConf) {
    super(hadoopConf);
  }

  @Override
  public void write(Path path, Iterator<String> actions, Boolean overwrite,
      Configuration hadoopConf) throws IOException {
    if (overwrite) {
      super.write(path, actions, true, hadoopConf);
      return;
    }
    FileSystem fs = path.getFileSystem(hadoopConf);
    try (FSDataOutputStream out = (FSDataOutputStream)
        fs.createFile(path).overwrite(false).must(CONDITIONAL_CREATE, true).build()) {
      while (actions.hasNext()) {
        out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
      }
    } catch (org.apache.hadoop.fs.FileAlreadyExistsException e) {
      throw alreadyThere(path, e);
    } catch (IOException e) {
      if (preconditionFailed(e)) {
        throw alreadyThere(path, e);
      }
      throw e;
    }
  }

  /** The PUT lost to another writer's: S3 answered 412 Precondition Failed. */
  static boolean preconditionFailed(Throwable error) {
    for (Throwable cause = error; cause != null; cause = cause.getCause()) {
      String message = String.valueOf(cause.getMessage());
      if (message.contains("Status Code: 412") || message.contains("PreconditionFailed")) {
        return true;
      }
    }
    return false;
  }

  private static FileAlreadyExistsException alreadyThere(Path path, Throwable cause) {
    FileAlreadyExistsException error = new FileAlreadyExistsException(path.toString());
    error.initCause(cause);
    return error;
  }
}
