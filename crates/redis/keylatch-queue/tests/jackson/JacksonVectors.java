import com.fasterxml.jackson.annotation.*;
import com.fasterxml.jackson.core.JsonGenerator.Feature;
import com.fasterxml.jackson.databind.*;
import com.fasterxml.jackson.databind.ObjectMapper.DefaultTypeResolverBuilder;
import com.fasterxml.jackson.databind.ObjectMapper.DefaultTyping;
import com.fasterxml.jackson.databind.jsontype.*;
import java.nio.charset.StandardCharsets;

/**
 * Prints what Redisson's JsonJacksonCodec writes (its mapper settings, copied from
 * JsonJacksonCodec.init and initTypeInclusion) for the vectors of keylatch-queue's json.rs tests.
 *
 *   CP=/usr/share/java/jackson-databind.jar:/usr/share/java/jackson-core.jar:/usr/share/java/jackson-annotations.jar
 *   javac -cp $CP JacksonVectors.java && java -cp $CP:. JacksonVectors
 */
public class JacksonVectors {
    public static class S { private String s; }

    public static class Order {
        private long id;
        private String name;
        private boolean paid;
        private Integer qty;
        private String note;
        private int zeta;
        private Long total;
    }
    public static ObjectMapper mapper() {
        ObjectMapper m = new ObjectMapper();
        m.setSerializationInclusion(JsonInclude.Include.NON_NULL);
        m.setVisibility(m.getSerializationConfig().getDefaultVisibilityChecker()
            .withFieldVisibility(JsonAutoDetect.Visibility.ANY)
            .withGetterVisibility(JsonAutoDetect.Visibility.NONE)
            .withSetterVisibility(JsonAutoDetect.Visibility.NONE)
            .withCreatorVisibility(JsonAutoDetect.Visibility.NONE));
        m.disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
        m.enable(Feature.WRITE_BIGDECIMAL_AS_PLAIN);
        m.disable(SerializationFeature.FAIL_ON_EMPTY_BEANS);
        m.enable(MapperFeature.SORT_PROPERTIES_ALPHABETICALLY);
        TypeResolverBuilder<?> t = new DefaultTypeResolverBuilder(DefaultTyping.NON_FINAL, BasicPolymorphicTypeValidator.builder().allowIfBaseType(Object.class).build()) {
            public boolean useForType(JavaType t) {
                while (t.isArrayType()) t = t.getContentType();
                if (t.getRawClass() == Long.class) return true;
                return !t.isFinal();
            }
        };
        t.init(JsonTypeInfo.Id.CLASS, null);
        t.inclusion(JsonTypeInfo.As.PROPERTY);
        m.setDefaultTyping(t);
        return m;
    }
    public static void main(String[] a) throws Exception {
        ObjectMapper m = mapper();
        Order o = new Order();
        o.id = 42; o.name = "héllo \"w\"\n\u0001/"; o.paid = true; o.qty = 3; o.zeta = -7;
        System.out.println(new String(m.writeValueAsBytes(o), StandardCharsets.UTF_8));
        o.total = 5L;
        System.out.println(new String(m.writeValueAsBytes(o), StandardCharsets.UTF_8));
        System.out.println(new String(m.writeValueAsBytes("text"), StandardCharsets.UTF_8));
        System.out.println(new String(m.writeValueAsBytes(42L), StandardCharsets.UTF_8));
        System.out.println(new String(m.writeValueAsBytes(42), StandardCharsets.UTF_8));
        StringBuilder b = new StringBuilder();
        for (char c = 0; c < 0x20; c++) b.append(c);
        b.append('\u007f').append('\u2028').append("\uD83D\uDE00").append("<>&'\\");
        S s = new S(); s.s = b.toString();
        System.out.println(new String(m.writeValueAsBytes(s), StandardCharsets.UTF_8));
        // Reading plain numbers into a Long field, and our form back.
        String ours = "{\"@class\":\"JacksonVectors$Order\",\"id\":1,\"name\":\"n\",\"paid\":false,\"qty\":2,\"total\":9,\"zeta\":0}";
        try { Order r = (Order) m.readValue(ours, Object.class); System.out.println("read plain total: " + r.total + " id " + r.id); }
        catch (Exception e) { System.out.println("plain Long refused: " + e.getMessage().split("\n")[0]); }
    }
}
